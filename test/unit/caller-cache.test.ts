// The authentication cache's rules, with a controlled clock and lookups held open.
import { describe, expect, it } from 'vitest';
import { CallerCache } from '../../server/resources/caller-cache.js';

describe('CallerCache', () => {
  it('answers from memory until the TTL, counted from when the lookup began, has passed', async () => {
    const cache = new CallerCache<string>(500);
    let lookups = 0;
    const lookup = async () => `caller ${++lookups}`;
    expect(await cache.resolve('t', lookup, 1000)).toBe('caller 1');
    expect(await cache.resolve('t', lookup, 1499)).toBe('caller 1');
    expect(await cache.resolve('t', lookup, 1500)).toBe('caller 2');
    expect(lookups).toBe(2);
  });

  it('forget() makes the next request look up again', async () => {
    const cache = new CallerCache<string>(500);
    let lookups = 0;
    const lookup = async () => `caller ${++lookups}`;
    await cache.resolve('t', lookup, 0);
    cache.forget();
    expect(await cache.resolve('t', lookup, 1)).toBe('caller 2');
  });

  it('a lookup that began before forget() does not store what it read (it may be the deleted key)', async () => {
    const cache = new CallerCache<string>(500);
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    const stale = cache.resolve('t', async () => { await held; return 'old caller'; }, 0);
    cache.forget();
    release();
    expect(await stale).toBe('old caller');
    expect(cache.size).toBe(0);
    expect(await cache.resolve('t', async () => undefined, 1)).toBeUndefined();
  });

  it('unknown tokens are never remembered: each is looked up', async () => {
    const cache = new CallerCache<string>(500);
    let lookups = 0;
    for (let i = 0; i < 3; i++) await cache.resolve('nobody', async () => { lookups++; return undefined; }, i);
    expect(lookups).toBe(3);
    expect(cache.size).toBe(0);
  });

  it('holds at most maxEntries tokens, dropping the oldest', async () => {
    const cache = new CallerCache<string>(500, 10);
    for (let i = 0; i < 100; i++) await cache.resolve(`token ${i}`, async () => `caller ${i}`, 0);
    expect(cache.size).toBe(10);
    let looked = false;
    expect(await cache.resolve('token 99', async () => { looked = true; return 'again'; }, 1)).toBe('caller 99');
    expect(looked).toBe(false);
  });
});
