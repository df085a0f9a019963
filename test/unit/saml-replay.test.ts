// The memory of used SAML assertions: a key is refused again until it expires, its memory is
// bounded in time and count, and a full memory refuses rather than forgets a live entry.
import { describe, expect, it } from 'vitest';
import { MAX_REMEMBER_MS, UsedAssertions } from '../../server/ingress/auth/saml-replay.js';

describe('UsedAssertions', () => {
  it.each([
    ['a second use before expiry is a replay', 1_000, 'replayed'],
    ['a use after expiry is fresh again', 10_001, 'fresh'],
  ] as const)('%s', (_why, secondAt, expected) => {
    const used = new UsedAssertions(10);
    expect(used.use('idp|_a1', 10_000, 0)).toBe('fresh');
    expect(used.use('idp|_a1', 10_000 + secondAt, secondAt)).toBe(expected);
  });

  it('remembers an assertion at most MAX_REMEMBER_MS and a few minutes of skew, whatever its stated expiry', () => {
    const used = new UsedAssertions(10);
    expect(used.use('k', Number.MAX_SAFE_INTEGER, 0)).toBe('fresh');
    expect(used.use('k', Number.MAX_SAFE_INTEGER, MAX_REMEMBER_MS)).toBe('replayed');
    expect(used.use('k', Number.MAX_SAFE_INTEGER, MAX_REMEMBER_MS + 10 * 60_000)).toBe('fresh');
  });

  it('holds at most its bound: expired entries make room, live ones are never dropped early', () => {
    const used = new UsedAssertions(3);
    for (const k of ['a', 'b', 'c']) expect(used.use(k, 100, 0)).toBe('fresh');
    expect(used.use('d', 100, 50)).toBe('full');
    expect(used.use('a', 100, 50)).toBe('replayed');
    expect(used.use('d', 200, 100)).toBe('fresh');
    expect(used.size).toBe(1);
  });
});
