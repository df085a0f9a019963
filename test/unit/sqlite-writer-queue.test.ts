// The SQLite writer's turn-taking (server/store/sqlite-writer.ts): holders run one at a time in
// arrival order, and a turn is taken at once, without waiting, only when nobody holds or waits.
import { describe, expect, it } from 'vitest';
import { Queue } from '../../server/store/sqlite-writer.js';

describe('Queue', () => {
  it('gives turns in arrival order, one holder at a time', async () => {
    const q = new Queue();
    const order: string[] = [];
    let holding = 0;
    const hold = (name: string, ms: number) => q.run(async () => {
      holding++;
      expect(holding).toBe(1);
      order.push(name);
      await new Promise((resolve) => setTimeout(resolve, ms));
      holding--;
    });
    await Promise.all([hold('a', 5), hold('b', 0), hold('c', 1)]);
    expect(order).toEqual(['a', 'b', 'c']);
  });

  it('tryAcquire takes a free turn at once and refuses while one is held or awaited', async () => {
    const q = new Queue();
    const first = q.tryAcquire();
    expect(first).toBeTypeOf('function');
    expect(q.tryAcquire()).toBeUndefined();
    const waiting = q.acquire();
    first!();
    // Released twice: still counted once.
    first!();
    expect(q.tryAcquire()).toBeUndefined();
    const second = await waiting;
    expect(q.tryAcquire()).toBeUndefined();
    second();
    const third = q.tryAcquire();
    expect(third).toBeTypeOf('function');
    let ran = false;
    const after = q.run(async () => { ran = true; });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(ran).toBe(false);
    third!();
    await after;
    expect(ran).toBe(true);
  });
});
