// The authentication cache's rules, with a controlled clock and lookups held open.
import { describe, expect, it } from 'vitest';
import { CallerCache } from '../../server/resources/caller-cache.js';
import { digestOf } from '../../server/http/tokens.js';

/** A lookup that answers what `answer` says for each call, counting calls. */
function counted(answer: (n: number, digest: string) => Promise<string | undefined>) {
  const calls: string[] = [];
  return { calls, lookup: (digest: string) => { calls.push(digest); return answer(calls.length, digest); } };
}

/** A promise and its resolver. */
function held<T>() {
  let release!: (v: T) => void;
  const promise = new Promise<T>((resolve) => { release = resolve; });
  return { promise, release };
}

describe('CallerCache', () => {
  it('answers from memory until the TTL, counted from when the lookup began, has passed', async () => {
    const l = counted(async (n) => `caller ${n}`);
    const cache = new CallerCache<string>(l.lookup, 500);
    expect(await cache.resolve('t', 1000)).toBe('caller 1');
    expect(await cache.resolve('t', 1499)).toBe('caller 1');
    expect(await cache.resolve('t', 1500)).toBe('caller 2');
    expect(l.calls).toEqual([digestOf('t'), digestOf('t')]);
  });

  it('a hit is answered at once, not as a promise', async () => {
    const cache = new CallerCache<string>(async () => 'caller', 500);
    await cache.resolve('t', 0);
    expect(cache.resolve('t', 1)).toBe('caller');
  });

  it('forget() makes the next request look up again', async () => {
    const l = counted(async (n) => `caller ${n}`);
    const cache = new CallerCache<string>(l.lookup, 500);
    await cache.resolve('t', 0);
    cache.forget();
    expect(await cache.resolve('t', 1)).toBe('caller 2');
  });

  it('a lookup that began before forget() does not store what it read (it may be the deleted key)', async () => {
    const gate = held<void>();
    const l = counted(async (n) => {
      if (n === 1) { await gate.promise; return 'old caller'; }
      return undefined;
    });
    const cache = new CallerCache<string>(l.lookup, 500);
    const stale = cache.resolve('t', 0);
    cache.forget();
    gate.release();
    expect(await stale).toBe('old caller');
    expect(cache.size).toBe(0);
    expect(await cache.resolve('t', 1)).toBeUndefined();
  });

  it('requests that miss while a lookup of their token is under way share it: one lookup for all', async () => {
    const gate = held<string>();
    const l = counted(() => gate.promise);
    const cache = new CallerCache<string>(l.lookup, 500);
    const answers = [cache.resolve('t', 0), cache.resolve('t', 1), cache.resolve('t', 2)];
    const other = cache.resolve('u', 2);
    expect(l.calls).toEqual([digestOf('t'), digestOf('u')]);
    gate.release('caller');
    expect(await Promise.all([...answers, other])).toEqual(['caller', 'caller', 'caller', 'caller']);
    expect(cache.resolve('t', 3)).toBe('caller');
  });

  it('after forget(), a request does not join a lookup begun before it (it may read the deleted key)', async () => {
    const first = held<string>();
    const l = counted((n) => (n === 1 ? first.promise : Promise.resolve(undefined)));
    const cache = new CallerCache<string>(l.lookup, 500);
    const before = cache.resolve('t', 0);
    cache.forget();
    expect(await cache.resolve('t', 1)).toBeUndefined();
    expect(l.calls).toHaveLength(2);
    first.release('old caller');
    expect(await before).toBe('old caller');
    expect(cache.size).toBe(0);
  });

  it('a lookup still under way after the TTL is not joined: a later request looks up afresh', async () => {
    const slow = held<string>();
    const l = counted((n) => (n === 1 ? slow.promise : Promise.resolve('fresh caller')));
    const cache = new CallerCache<string>(l.lookup, 500);
    const first = cache.resolve('t', 0);
    expect(await cache.resolve('t', 500)).toBe('fresh caller');
    slow.release('slow caller');
    expect(await first).toBe('slow caller');
    expect(l.calls).toHaveLength(2);
  });

  it('a lookup that fails fails each request that shared it, and the next request looks up again', async () => {
    const l = counted(async (n) => {
      if (n === 1) throw new Error('database gone');
      return 'caller';
    });
    const cache = new CallerCache<string>(l.lookup, 500);
    const shared = [cache.resolve('t', 0), cache.resolve('t', 1)];
    for (const s of shared) await expect(s).rejects.toThrow('database gone');
    expect(await cache.resolve('t', 2)).toBe('caller');
  });

  it('unknown tokens are never remembered: each request after a lookup ends looks up again', async () => {
    const l = counted(async () => undefined);
    const cache = new CallerCache<string>(l.lookup, 500);
    for (let i = 0; i < 3; i++) await cache.resolve('nobody', i);
    expect(l.calls).toHaveLength(3);
    expect(cache.size).toBe(0);
  });

  it('holds at most maxEntries tokens, dropping the oldest', async () => {
    const l = counted(async (_n, digest) => `caller of ${digest}`);
    const cache = new CallerCache<string>(l.lookup, 500, 10);
    for (let i = 0; i < 100; i++) await cache.resolve(`token ${i}`, 0);
    expect(cache.size).toBe(10);
    expect(await cache.resolve('token 99', 1)).toBe(`caller of ${digestOf('token 99')}`);
    expect(l.calls).toHaveLength(100);
  });
});
