// The sliding window behind 429 and Retry-After, with a controlled clock.
import { describe, expect, it } from 'vitest';
import { clientKey, RateLimiter } from '../../server/http/rate-limit.js';

describe('RateLimiter', () => {
  it('allows perMinute requests per sliding minute, then says how many seconds to wait', () => {
    const l = new RateLimiter(3);
    expect([l.take('k', 0), l.take('k', 10_000), l.take('k', 20_000)]).toEqual([0, 0, 0]);
    expect(l.take('k', 30_000)).toBe(31); // the first minute's 3 hits weigh 3 until just after 60 s
    expect(l.take('k', 59_999)).toBe(1); // never 0 while refused
    expect(l.take('k', 60_001)).toBe(0); // the last minute's 3 hits now weigh a little under 3
    // A counter, not a log: the last minute's hits count as spread evenly over it, so the
    // next fits when their weight has fallen to 2 (at 80 s), not when the hit at 10 s leaves.
    expect(l.take('k', 60_002)).toBe(20);
  });

  it('costs the same per request whatever the limit: a window of counters, not a log', () => {
    const l = new RateLimiter(1_000_000);
    for (let i = 0; i < 200_000; i++) expect(l.take('k', i / 10)).toBe(0);
    expect(l.size).toBe(1);
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

  it('forgets keys that went quiet as new ones arrive', () => {
    const l = new RateLimiter(5);
    for (let i = 0; i < 500; i++) l.take(`old${i}`, 0);
    // Each new key removes up to two that have been quiet for two windows.
    for (let i = 0; i < 250; i++) l.take(`new${i}`, 120_000 + i);
    expect(l.size).toBe(250);
  });

  it('with maxKeys, a flood of new keys keeps memory bounded and forgets the oldest first', () => {
    const l = new RateLimiter(2, 60_000, 100);
    expect(l.take('first', 0)).toBe(0);
    expect(l.take('first', 1)).toBe(0);
    expect(l.take('first', 2)).toBeGreaterThan(0);
    for (let i = 0; i < 10_000; i++) l.take(`addr-${i}`, 10 + i);
    expect(l.size).toBeLessThanOrEqual(100);
    // 'first' was forgotten to make room: it starts afresh rather than growing the map.
    expect(l.take('first', 20_000)).toBe(0);
    expect(l.size).toBeLessThanOrEqual(100);
  });
});

describe('clientKey', () => {
  it.each([
    { address: '203.0.113.9', key: '203.0.113.9', reason: 'IPv4 as is' },
    { address: '::ffff:203.0.113.9', key: '203.0.113.9', reason: 'IPv4-mapped IPv6 is the IPv4 client' },
    { address: '2001:db8:1:2:aaaa:bbbb:cccc:dddd', key: '2001:db8:1:2::/64', reason: 'IPv6 by its /64' },
    { address: '2001:db8:1:2::1', key: '2001:db8:1:2::/64', reason: 'another address of the same /64' },
    { address: '2001:DB8::1', key: '2001:db8:0:0::/64', reason: 'compressed and upper case' },
    { address: '2001:0db8:0001:0002::9', key: '2001:db8:1:2::/64', reason: 'leading zeros do not make another key' },
    { address: '::1', key: '0:0:0:0::/64', reason: 'loopback' },
    { address: 'fe80::1%eth0', key: 'fe80:0:0:0::/64', reason: 'a zone is dropped' },
  ])('$reason', ({ address, key }) => {
    expect(clientKey(address)).toBe(key);
  });
});
