// The count of a client's relays through agents (server/ingress/client-relays.ts); the key it
// counts under is rate-limit.ts's clientKey (test/unit/rate-limit.test.ts).
import { describe, expect, it } from 'vitest';
import { ClientRelays } from '../../server/ingress/client-relays.js';

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
    // An IPv6 client counts by its /64: another host of the block shares the count.
    const v6 = new ClientRelays(1);
    expect(v6.take('2001:db8:1:2::1')).toBeTruthy();
    expect(v6.take('2001:0db8:0001:0002::9')).toBeUndefined();
    expect(v6.holding('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe(1);
    const off = new ClientRelays(0);
    for (let i = 0; i < 1000; i++) expect(off.take('192.0.2.1')).toBeTruthy();
    expect(off.holding('192.0.2.1')).toBe(0);
  });
});
