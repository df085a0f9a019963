// The key a client's relays are counted under (server/ingress/client-relays.ts), and the count.
import { describe, expect, it } from 'vitest';
import { ClientRelays, clientKey } from '../../server/ingress/client-relays.js';

describe('clientKey', () => {
  it.each([
    ['an IPv4 address is its own key', '203.0.113.7', '203.0.113.7'],
    ['an IPv6 address counts by its /64', '2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['another host of the same /64 shares the key', '2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['a compressed prefix is expanded', '2001:db8::1', '2001:db8:0:0::/64'],
    ['leading zeros do not make another key', '2001:0db8:0001:0002::9', '2001:db8:1:2::/64'],
    ['loopback', '::1', '0:0:0:0::/64'],
    ['something unparsable is its own key', 'not:an:address', 'not:an:address'],
  ])('%s', (_why, ip, key) => {
    expect(clientKey(ip)).toBe(key);
  });
});

describe('ClientRelays', () => {
  it('refuses past max, gives a slot back once per release, and counts nothing at 0', () => {
    const r = new ClientRelays(2);
    const a = r.take('192.0.2.1');
    const b = r.take('192.0.2.1');
    expect(a && b).toBeTruthy();
    expect(r.take('192.0.2.1')).toBeUndefined();
    expect(r.take('192.0.2.2')).toBeTruthy();
    a!();
    a!();
    expect(r.holding('192.0.2.1')).toBe(1);
    expect(r.take('192.0.2.1')).toBeTruthy();
    expect(r.take('192.0.2.1')).toBeUndefined();
    const off = new ClientRelays(0);
    for (let i = 0; i < 1000; i++) expect(off.take('192.0.2.1')).toBeTruthy();
    expect(off.holding('192.0.2.1')).toBe(0);
  });
});
