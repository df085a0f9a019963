// The rate-limit window against a reference model on a fake clock: the model keeps every
// accepted request's time and recomputes the windows' counts by scanning them, and finds
// retry-after by trying each later whole second; the real window keeps two counters.
import { describe, expect, it } from 'vitest';
import { SlidingWindows } from '../../server/policy/sliding-window.js';

/**
 * The reference: the same definition of the window, computed the slow and obvious way. A
 * key's windows start at its first request, and start again at a request that comes two
 * or more whole windows after the window of the key's last request.
 */
class Model {
  private readonly keys = new Map<string, { origin: number; seen: number[]; accepted: number[] }>();
  private estimate(k: { origin: number; accepted: number[] }, widthMs: number, t: number) {
    const start = k.origin + Math.floor((t - k.origin) / widthMs) * widthMs;
    const prev = k.accepted.filter((x) => x >= start - widthMs && x < start).length;
    const curr = k.accepted.filter((x) => x >= start && x <= t).length;
    return (prev * (widthMs - (t - start))) / widthMs + curr;
  }
  /** `n` units at once: they fit when the estimate plus `n - 1` is below the capacity (one unit: the estimate is). */
  take(key: string, capacity: number, widthMs: number, now: number, n = 1): number {
    let k = this.keys.get(key);
    const windowOf = (t: number) => Math.floor((t - k!.origin) / widthMs);
    if (!k || windowOf(now) >= windowOf(k.seen.at(-1)!) + 2) this.keys.set(key, (k = { origin: now, seen: [], accepted: [] }));
    k.seen.push(now);
    if (this.estimate(k, widthMs, now) + n - 1 < capacity) {
      for (let i = 0; i < n; i++) k.accepted.push(now);
      return 0;
    }
    for (let s = 1; ; s++) if (this.estimate(k, widthMs, now + s * 1000) + n - 1 < capacity) return s;
  }
}

/** A small deterministic generator, so a failure replays. */
function random(seed: number) {
  let x = seed >>> 0;
  return () => ((x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0) / 2 ** 32);
}

describe('sliding window', () => {
  it('lets capacity through, then says how long until a slot frees (capacity 2 per 60 s)', () => {
    const w = new SlidingWindows();
    expect([w.take('k', 2, 60_000, 0), w.take('k', 2, 60_000, 1000)]).toEqual([0, 0]);
    // Both slots free once the first window has slid past, just after 60 s: at 61 s in whole seconds.
    expect(w.take('k', 2, 60_000, 2000)).toBe(59);
    expect(w.take('k', 2, 60_000, 59_999)).toBe(1); // never 0 while refused
    // At 60 s exactly the previous window still weighs fully: 2 of 2.
    expect(w.take('k', 2, 60_000, 60_000)).toBe(1);
    // Just after, its weight fades below capacity and one request fits.
    expect(w.take('k', 2, 60_000, 60_001)).toBe(0);
    // Now 2*(59.998/60) + 1 >= 2 until the previous window's weight falls under 1 (at 90 s).
    expect(w.take('k', 2, 60_000, 60_002)).toBe(30);
    expect(w.take('k', 2, 60_000, 90_001)).toBe(0);
  });

  it('forgets a window two windows later, and counts keys apart', () => {
    const w = new SlidingWindows();
    expect(w.take('a', 1, 60_000, 0)).toBe(0);
    expect(w.take('b', 1, 60_000, 0)).toBe(0);
    expect(w.take('a', 1, 60_000, 1)).toBe(60);
    expect(w.take('a', 1, 60_000, 120_000)).toBe(0);
  });

  it('takes n units at once, all or none, as the secret-fingerprint budget does (capacity 3 per hour)', () => {
    const w = new SlidingWindows();
    const hour = 3_600_000;
    expect(w.take('k', 3, hour, 0, 2)).toBe(0);
    // 2 of 3 taken: 2 more do not fit until the hour has passed, and refused, they take nothing; 1 still does.
    expect(w.take('k', 3, hour, 1000, 2)).toBe(hour / 1000);
    expect(w.take('k', 3, hour, 1000, 1)).toBe(0);
    expect(w.take('k', 3, hour, 2000, 1)).toBeGreaterThan(0);
    expect(() => w.take('k', 3, hour, 2000, 4)).toThrow(RangeError);
  });

  it.each([
    { seed: 1, capacity: 1, width: 60_000, keys: 1, gap: 4000, most: 1 },
    { seed: 2, capacity: 3, width: 60_000, keys: 2, gap: 9000, most: 1 },
    { seed: 3, capacity: 10, width: 60_000, keys: 3, gap: 2500, most: 1 },
    { seed: 4, capacity: 5, width: 90_000, keys: 1, gap: 20_000, most: 1 },
    { seed: 5, capacity: 7, width: 600_000, keys: 2, gap: 30_000, most: 1 },
    { seed: 6, capacity: 2, width: 60_000, keys: 1, gap: 60_000, most: 1 },
    // Requests of several units at once, as the fingerprint budget counts a request's items.
    { seed: 7, capacity: 10, width: 60_000, keys: 2, gap: 5000, most: 4 },
    { seed: 8, capacity: 60, width: 600_000, keys: 1, gap: 120_000, most: 20 },
    { seed: 9, capacity: 5, width: 60_000, keys: 1, gap: 30_000, most: 5 },
  ])('agrees with the reference model on every decision and retry-after (seed $seed, capacity $capacity per $width ms, up to $most units a request)', ({ seed, capacity, width, keys, gap, most }) => {
    const next = random(seed);
    const real = new SlidingWindows();
    const model = new Model();
    let now = 0;
    const decisions: number[] = [];
    for (let i = 0; i < 600; i++) {
      // Arrivals bunch up and spread out; a quarter land exactly on a window edge of the first key.
      now += next() < 0.25 ? width - (now % width) : Math.floor(next() * gap);
      const key = `k${Math.floor(next() * keys)}`;
      const n = most > 1 ? 1 + Math.floor(next() * most) : 1;
      const want = model.take(key, capacity, width, now, n);
      expect(real.take(key, capacity, width, now, n), `request ${i} of ${n} at ${now} ms on ${key}`).toBe(want);
      decisions.push(want);
    }
    // The runs exercised both outcomes.
    expect(decisions.some((d) => d === 0)).toBe(true);
    expect(decisions.some((d) => d > 0)).toBe(true);
  });

  it('holds at most maxBuckets live buckets, evicting the idlest and counting it', () => {
    const w = new SlidingWindows(100);
    for (let i = 0; i < 100; i++) w.take(`k${i}`, 1, 60_000, 0);
    expect(w.take('k0', 1, 60_000, 60_500)).toBe(0); // k0 moves to a new window: the freshest
    for (let i = 100; i < 150; i++) w.take(`k${i}`, 1, 60_000, 61_000);
    expect(w.stats()).toEqual({ buckets: 100, evictions: 50, expired: 0 });
    // k0 survived (it was fresh); k1 was evicted and starts afresh.
    expect(w.take('k0', 1, 60_000, 61_000)).toBeGreaterThan(0);
    expect(w.take('k1', 1, 60_000, 61_000)).toBe(0);
  });

  it('expires idle buckets as new ones arrive, so a stream of one-off keys stays small', () => {
    const w = new SlidingWindows(1_000_000);
    for (let i = 0; i < 10_000; i++) w.take(`once${i}`, 5, 60_000, i * 100);
    const { buckets, evictions, expired } = w.stats();
    expect(evictions).toBe(0);
    expect(expired).toBeGreaterThan(8000);
    // Only keys seen in the last two windows (120 s = 1200 requests) remain, give or take the sweep.
    expect(buckets).toBeLessThan(1400);
  });
});
