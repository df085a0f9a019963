// Sign-in at the edge as pure functions: the sealed cookie refuses any altered byte and any
// other route or key; a session ends at inactivity_timeout and at maximum_duration (and the
// defaults when 0); OAuth's allow lists (GitHub's organisation lists with them) combine as docs/ingress.md says; the callback finds
// its route from the state only for a route with a sign-in module.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { callbackRoute } from '../../server/ingress/auth/callback-route.js';
import { CookieSealer, cookieHeaderWithout, readCookies } from '../../server/ingress/auth/cookies.js';
import { oauthAllows } from '../../server/ingress/auth/oauth.js';
import { DEFAULT_INACTIVITY_SECONDS, DEFAULT_MAXIMUM_SECONDS, limitsOf, sessionEnded, SignedOut, type Session } from '../../server/ingress/auth/session.js';
import { routeMatcher } from '../../server/ingress/http/select-route.js';

describe('sealed cookies', () => {
  const sealer = new CookieSealer(randomBytes(32));
  const sealed = sealer.seal('session:r1', { subject: 'u1' });

  it('open for the route they were sealed for, and nothing else', () => {
    expect(sealer.open('session:r1', sealed)).toEqual({ subject: 'u1' });
    expect(sealer.open('session:r2', sealed)).toBeUndefined();
    expect(new CookieSealer(randomBytes(32)).open('session:r1', sealed)).toBeUndefined();
    // Not the last character: its low bits are base64 padding, so A and B there can decode alike.
    for (const i of [3, 10, 20, sealed.length - 2]) {
      const c = sealed[i] === 'A' ? 'B' : 'A';
      expect(sealer.open('session:r1', sealed.slice(0, i) + c + sealed.slice(i + 1)), `byte ${i}`).toBeUndefined();
    }
    expect(sealer.open('session:r1', undefined)).toBeUndefined();
    expect(sealer.open('session:r1', 'v1.')).toBeUndefined();
  });

  it('the edge cookies are taken out of what goes upstream', () => {
    expect(readCookies({ cookie: 'a=1; service.session=x; b=2' }).get('service.session')).toBe('x');
    expect(cookieHeaderWithout('a=1; service.session=x; b=2', new Set(['service.session']))).toBe('a=1; b=2');
    expect(cookieHeaderWithout('service.session=x', new Set(['service.session']))).toBeUndefined();
  });
});

describe('session limits', () => {
  const t0 = 1_700_000_000_000;
  const s: Session = { sid: 'sid-1', subject: 'u', created: t0, seen: t0 };
  const limits = limitsOf({ inactivity_timeout: 60, maximum_duration: 3600 });

  it.each([
    [59_999, t0, undefined],
    [60_000, t0, 'inactivity_timeout'],
    [3_599_000, t0 + 3_560_000, undefined],
    [3_600_000, t0 + 3_599_000, 'maximum_duration'],
  ])('at +%d ms, last seen %d: %s', (after, seen, why) => {
    expect(sessionEnded({ ...s, seen }, limits, t0 + after)).toBe(why);
  });

  it('0 means the documented defaults', () => {
    expect(limitsOf({ inactivity_timeout: 0, maximum_duration: 0 })).toEqual({ inactivityMs: DEFAULT_INACTIVITY_SECONDS * 1000, maximumMs: DEFAULT_MAXIMUM_SECONDS * 1000 });
  });

  it('a session without a subject is not one', () => {
    expect(sessionEnded({ ...s, subject: '' }, limits, t0)).toBe('malformed');
  });

  it('a session without an id (made before sessions had one, so it could not be signed out of) signs in again', () => {
    const { sid: _, ...old } = s;
    expect(sessionEnded(old as Session, limits, t0)).toBe('malformed');
  });
});

describe('sessions signed out of', () => {
  const t0 = 1_700_000_000_000;
  const session = (sid: string, created = t0) => ({ sid, created });

  it('are remembered until their cookie would have expired, then forgotten', () => {
    const out = new SignedOut(10);
    out.signOut('a', t0 + 1000, t0);
    expect(out.has(session('a'), t0 + 999)).toBe(true);
    expect(out.has(session('b'), t0 + 999)).toBe(false);
    expect(out.has(session('a'), t0 + 1000)).toBe(false);
    expect(out.size).toBe(0);
  });

  it('full of live entries, forget none: every session signed in before then ends, later ones do not', () => {
    const out = new SignedOut(3);
    for (const sid of ['a', 'b', 'c']) out.signOut(sid, t0 + 10_000, t0);
    out.signOut('d', t0 + 10_000, t0 + 5);
    expect(out.size).toBe(0);
    for (const sid of ['a', 'b', 'c', 'd', 'never-signed-out']) expect(out.has(session(sid, t0), t0 + 6), sid).toBe(true);
    expect(out.has(session('new', t0 + 6), t0 + 7)).toBe(false);
  });

  it('full, expired entries make room first', () => {
    const out = new SignedOut(2);
    out.signOut('a', t0 + 10, t0);
    out.signOut('b', t0 + 10_000, t0);
    out.signOut('c', t0 + 10_000, t0 + 20);
    expect(out.size).toBe(2);
    expect(out.has(session('x', t0), t0 + 21)).toBe(false);
    expect(out.has(session('c', t0), t0 + 21)).toBe(true);
  });
});

describe('oauth allow lists', () => {
  const ada = { emails: ['Ada@Example.com'], orgs: ['edgeform'], teams: ['edgeform/core'] };
  it.each<[Record<string, string[]>, boolean, string]>([
    [{}, true, 'no list admits anyone'],
    [{ email_addresses: ['ada@example.com'] }, true, 'address, case-insensitive'],
    [{ email_domains: ['example.org'] }, false, 'other domain'],
    [{ organizations: ['EdgeForm'] }, true, 'organisation'],
    [{ teams: ['edgeform/ops'] }, false, 'another team'],
    [{ teams: ['edgeform/ops'], organizations: ['edgeform'] }, true, 'org or team'],
    [{ email_domains: ['example.com'], organizations: ['other'] }, false, 'both groups must pass'],
  ])('%j -> %s (%s)', (lists, allowed, _why) => {
    expect(oauthAllows(lists, ada)).toBe(allowed);
  });
});

describe('callback route', () => {
  const matchers = [
    routeMatcher({ id: 'edghtsrt_plain', match: '/', match_type: 'path_prefix' }),
    routeMatcher({ id: 'edghtsrt_app', match: '/app', match_type: 'path_prefix', oidc: { issuer: 'https://id.example.com' } }),
  ];
  it('is the route the state names, when it signs in', () => {
    expect(callbackRoute(matchers, '/_edgeform/auth/callback', '?code=c&state=edghtsrt_app~xyz')?.id).toBe('edghtsrt_app');
    expect(callbackRoute(matchers, '/_edgeform/auth/callback', '?state=edghtsrt_plain~xyz')).toBeUndefined();
    expect(callbackRoute(matchers, '/_edgeform/auth/callback', '?state=nothing')).toBeUndefined();
    expect(callbackRoute(matchers, '/other', '?state=edghtsrt_app~xyz')).toBeUndefined();
  });
});
