// The sliding window behind 429 and Retry-After, with a controlled clock.
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../server/http/rate-limit.js';

describe('RateLimiter', () => {
  it('allows perMinute requests per sliding minute, then says how many seconds to wait', () => {
    const l = new RateLimiter(3);
    expect([l.take('k', 0), l.take('k', 10_000), l.take('k', 20_000)]).toEqual([0, 0, 0]);
    expect(l.take('k', 30_000)).toBe(30); // the first hit leaves the window at 60 s
    expect(l.take('k', 59_999)).toBe(1); // never 0 while refused
    expect(l.take('k', 60_001)).toBe(0); // the window slid past the first hit
    expect(l.take('k', 60_002)).toBe(10); // now the hit at 10 s is the oldest
  });

  it('refused requests do not count against the key', () => {
    const l = new RateLimiter(1);
    expect(l.take('k', 0)).toBe(0);
    for (let t = 1000; t < 60_000; t += 1000) expect(l.take('k', t)).toBeGreaterThan(0);
    expect(l.take('k', 60_001)).toBe(0);
  });

  it('counts keys separately', () => {
    const l = new RateLimiter(1);
    expect(l.take('a', 0)).toBe(0);
    expect(l.take('b', 0)).toBe(0);
    expect(l.take('a', 1)).toBe(60);
  });

  it('0 turns the limit off', () => {
    const l = new RateLimiter(0);
    for (let i = 0; i < 10_000; i++) expect(l.take('k', i)).toBe(0);
    expect(l.size).toBe(0);
  });

  it('forgets keys that went quiet', () => {
    const l = new RateLimiter(5);
    for (let i = 0; i < 500; i++) l.take(`old${i}`, 0);
    for (let i = 0; i < 500; i++) l.take('busy', 120_000 + i);
    expect(l.size).toBe(1);
  });
});
