// OAuth at the edge with every provider, end to end: the real server with --ingress, one
// local fake per provider serving that provider's documented paths and user-info shape
// (fake-oauth.ts; EDGEFORM_OAUTH_<P>_URL points the edge at it), edgeform agent to an upstream
// echoing what it receives, and a browser-like client. Each of the eight signs in; GitLab (with
// PKCE) carries the allow lists, the managed app, the re-check and the forged inputs; Google
// the session limits on a shifted clock; Amazon a provider down or silent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OAUTH_PROVIDERS } from '../../provider/catalog/route-modules.js';
import { OAUTH_PROVIDER_TABLE, oauthEndpoints, oauthSettings, type OAuthProviderName } from '../../server/ingress/auth/oauth-providers.js';
import { Browser } from '../helpers/browser.js';
import { startFakeOAuth, type FakeOAuth, type FakeOAuthUser } from '../helpers/fake-oauth.js';
import type { TestServer } from '../helpers/server.js';
import { clockAhead, startSignInEdge, type SignInEdge } from '../helpers/sign-in-edge.js';
import { until } from '../helpers/wait.js';

const HOST = 'oauth.example.com';
const APP = `https://${HOST}`;
const CALLBACK = `${APP}/_edgeform/auth/callback`;
const appOf = (p: OAuthProviderName) => ({ clientId: `cid-${p}`, clientSecret: `secret-${p}` });
const own = (p: OAuthProviderName) => ({ client_id: appOf(p).clientId, client_secret: appOf(p).clientSecret });
const ada = (): FakeOAuthUser => ({ id: 1001, login: 'ada', name: 'Ada Lovelace', email: 'ada@example.com' });
const eve = (): FakeOAuthUser => ({ id: 1002, login: 'eve', name: 'Eve', email: 'eve@evil.test' });
/** Ada's subject as each provider's user-info shape gives it. */
const SUBJECT: Record<OAuthProviderName, string> = {
  github: '1001', facebook: '1001', microsoft: '00000000-0000-0000-0000-000000001001', google: '1001',
  linkedin: 'li-1001', gitlab: '1001', twitch: '1001', amazon: 'amzn1.account.1001',
};

let edge: SignInEdge;
let s: TestServer;
let ingress: { port: number; ca: string };
const fakes = {} as Record<OAuthProviderName, FakeOAuth>;
const ids: Record<string, string> = {};
const savedEnv = { ...process.env };

const browser = () => new Browser(ingress);
/** A fresh browser signed in as `user` with `p` from `path`: the final answer. */
async function visitAs(p: OAuthProviderName, user: FakeOAuthUser, path: string) {
  fakes[p].signInAs(user);
  const b = browser();
  return { b, r: await b.follow(`${APP}${path}`) };
}
/** Starts a sign-in and stops at the callback: the callback URL (the browser holds the flow cookie). */
async function untilCallback(b: Browser, path: string): Promise<string> {
  let callback = '';
  await b.follow(`${APP}${path}`, (next) => (callback = next).startsWith(CALLBACK));
  expect(callback.startsWith(CALLBACK)).toBe(true);
  return callback;
}
const later = <T>(ms: number, fn: () => Promise<T>) => clockAhead(s, ms, fn);
const refusedWith = (r: { status: number; headers: Record<string, unknown>; body: string }, status: number, code: string) => {
  expect(r.status).toBe(status);
  expect(r.headers['edgeform-error-code']).toBe(code);
  expect(r.body).toContain(code);
  expect(r.body).not.toContain('"headers"');
};

beforeAll(async () => {
  for (const p of OAUTH_PROVIDERS) {
    fakes[p] = await startFakeOAuth(p, appOf(p));
    Object.assign(process.env, fakes[p].env);
  }
  // The managed app for GitLab only; Twitch has none.
  process.env.EDGEFORM_OAUTH_GITLAB_CLIENT_ID = appOf('gitlab').clientId;
  process.env.EDGEFORM_OAUTH_GITLAB_CLIENT_SECRET = appOf('gitlab').clientSecret;
  delete process.env.EDGEFORM_OAUTH_TWITCH_CLIENT_ID;
  delete process.env.EDGEFORM_OAUTH_TWITCH_CLIENT_SECRET;
  edge = await startSignInEdge(HOST, 'oauth');
  ({ s, ingress } = edge);
  const route = async (match: string, p: OAuthProviderName, member: Record<string, unknown>, more: Record<string, unknown> = {}) => {
    ids[match] = await edge.route(match, { oauth: { provider: { [p]: member }, ...more } });
  };
  for (const p of OAUTH_PROVIDERS) await route(`/p/${p}`, p, own(p));
  await route('/gl/email', 'gitlab', { ...own('gitlab'), email_addresses: ['ADA@example.com'] });
  await route('/gl/domain', 'gitlab', { ...own('gitlab'), email_domains: ['example.com'] });
  await route('/gl/managed', 'gitlab', {});
  await route('/gl/recheck', 'gitlab', { ...own('gitlab'), email_domains: ['example.com'] }, { auth_check_interval: 60 });
  await route('/tw/managed', 'twitch', {});
  await route('/go/limits', 'google', own('google'), { inactivity_timeout: 60, maximum_duration: 300, options_passthrough: true });
  await until(async () => (await browser().request(`${APP}/go/limits`)).status === 302);
}, 90_000);

afterAll(async () => {
  await edge?.close();
  for (const f of Object.values(fakes)) await f.close();
  for (const k of Object.keys(process.env)) if (k.startsWith('EDGEFORM_OAUTH_') && !(k in savedEnv)) delete process.env[k];
  Object.assign(process.env, Object.fromEntries(Object.entries(savedEnv).filter(([k]) => k.startsWith('EDGEFORM_OAUTH_'))));
});

describe('oauth at the edge: every provider', () => {
  it.each(OAUTH_PROVIDERS)('%s: to the documented authorize path with the default scopes, then signed in with the identity upstream', async (p) => {
    fakes[p].signInAs(ada());
    const b = browser();
    const first = await b.request(`${APP}/p/${p}/page?x=1`);
    expect(first.status).toBe(302);
    const to = new URL(first.headers.location!);
    expect(to.origin + to.pathname).toBe(oauthEndpoints(oauthSettings(p, fakes[p].env)).authorize);
    expect(to.searchParams.get('client_id')).toBe(appOf(p).clientId);
    expect(to.searchParams.get('redirect_uri')).toBe(CALLBACK);
    expect(to.searchParams.get('scope')).toBe(OAUTH_PROVIDER_TABLE[p].scopes.join(' '));
    expect(to.searchParams.get('state')).toMatch(new RegExp(`^${ids[`/p/${p}`]}~`));
    expect(to.searchParams.has('code_challenge')).toBe(OAUTH_PROVIDER_TABLE[p].pkce);

    const r = await b.follow(to.href);
    expect(r.status).toBe(200);
    const got = JSON.parse(r.body);
    expect(got.path).toBe(`/p/${p}/page?x=1`);
    expect(got.headers).toMatchObject({ 'edgeform-auth-provider': p, 'edgeform-auth-subject': SUBJECT[p], 'edgeform-auth-email': 'ada@example.com', 'edgeform-auth-name': 'Ada%20Lovelace' });
    expect(got.headers.cookie ?? '').not.toContain('service.');
    expect(fakes[p].tokenCalls).toBeGreaterThan(0);
  });
});

describe('oauth at the edge: allow lists and the managed app (gitlab)', () => {
  it.each(['/gl/email', '/gl/domain'])('%s admits ada and refuses eve with 403 ERR_SERVICE_804 and no session', async (path) => {
    const ok = await visitAs('gitlab', ada(), `${path}/`);
    expect(ok.r.status).toBe(200);
    expect(JSON.parse(ok.r.body).headers['edgeform-auth-email']).toBe('ada@example.com');
    const no = await visitAs('gitlab', eve(), `${path}/`);
    refusedWith(no.r, 403, 'ERR_SERVICE_804');
    expect(no.r.body).toContain('eve');
    expect(no.b.cookiesOf(HOST).has('service.session')).toBe(false);
  });

  it('an email the provider has not confirmed does not pass a list', async () => {
    const no = await visitAs('gitlab', { ...ada(), verified: false }, '/gl/domain/');
    refusedWith(no.r, 403, 'ERR_SERVICE_804');
  });

  it('a route without client_id signs in with the managed app of the server settings', async () => {
    const b = browser();
    fakes.gitlab.signInAs(ada());
    const r = await b.follow(`${APP}/gl/managed/`);
    expect(r.status).toBe(200);
    expect(fakes.gitlab.lastAuthorize?.searchParams.get('client_id')).toBe(process.env.EDGEFORM_OAUTH_GITLAB_CLIENT_ID);
  });

  it('a route without client_id and no managed app answers a page naming the settings, 501 ERR_SERVICE_805', async () => {
    const r = await browser().request(`${APP}/tw/managed/`);
    refusedWith(r, 501, 'ERR_SERVICE_805');
    expect(r.body).toContain('EDGEFORM_OAUTH_TWITCH_CLIENT_ID');
    expect(r.body).toContain('EDGEFORM_OAUTH_TWITCH_CLIENT_SECRET');
  });
});

describe('oauth at the edge: auth_check_interval', () => {
  it('a user whose email left the domain loses the session at the next check; within the interval the provider is not asked', async () => {
    const carol: FakeOAuthUser = { id: 1003, login: 'carol', name: 'Carol', email: 'carol@example.com' };
    const { b, r } = await visitAs('gitlab', carol, '/gl/recheck/');
    expect(r.status).toBe(200);
    const calls = fakes.gitlab.userinfoCalls;
    carol.email = 'carol@elsewhere.test';
    expect((await b.request(`${APP}/gl/recheck/`)).status).toBe(200);
    expect(fakes.gitlab.userinfoCalls).toBe(calls);
    const gone = await later(61_000, () => b.request(`${APP}/gl/recheck/`));
    refusedWith(gone, 403, 'ERR_SERVICE_804');
    expect(gone.body).toContain('carol');
    expect(b.cookiesOf(HOST).has('service.session')).toBe(false);
    expect(fakes.gitlab.userinfoCalls).toBe(calls + 1);
  });

  it('a token the provider no longer accepts sends the browser to sign in again, where the lists are checked anew', async () => {
    const dave: FakeOAuthUser = { id: 1004, login: 'dave', name: 'Dave', email: 'dave@example.com' };
    const { b, r } = await visitAs('gitlab', dave, '/gl/recheck/');
    expect(r.status).toBe(200);
    fakes.gitlab.revokeTokens();
    const again = await later(61_000, () => b.request(`${APP}/gl/recheck/`));
    expect(again.status).toBe(302);
    expect(again.headers.location).toContain('/oauth/authorize');
    expect(b.cookiesOf(HOST).has('service.session')).toBe(false);
    const back = await b.follow(again.headers.location!);
    expect(back.status).toBe(200);
    expect(JSON.parse(back.body).headers['edgeform-auth-subject']).toBe('1004');
  });
});

describe('oauth at the edge: session limits and OPTIONS (google)', () => {
  it('inactivity_timeout: a session unused for 60 s is sent to sign in again', async () => {
    const { b, r } = await visitAs('google', ada(), '/go/limits/');
    expect(r.status).toBe(200);
    expect((await later(59_000, () => b.request(`${APP}/go/limits/`))).status).toBe(200);
    const gone = await later(59_000 + 61_000, () => b.request(`${APP}/go/limits/`));
    expect(gone.status).toBe(302);
    expect(new URL(gone.headers.location!).pathname).toBe('/o/oauth2/v2/auth');
  });

  it('maximum_duration: a session in use every 50 s still ends 300 s after sign-in', async () => {
    const { b, r } = await visitAs('google', ada(), '/go/limits/');
    expect(r.status).toBe(200);
    for (let t = 50; t < 300; t += 50) expect((await later(t * 1000, () => b.request(`${APP}/go/limits/`))).status, `at +${t} s`).toBe(200);
    expect((await later(301_000, () => b.request(`${APP}/go/limits/`))).status).toBe(302);
  });

  it('options_passthrough lets OPTIONS through without a session; a POST without one gets 401 ERR_SERVICE_800', async () => {
    const before = edge.seen.length;
    const pre = await browser().request(`${APP}/go/limits/api`, { method: 'OPTIONS' });
    expect(pre.status).toBe(200);
    expect(edge.seen.length).toBe(before + 1);
    expect(edge.seen.at(-1)!['edgeform-auth-subject']).toBeUndefined();
    refusedWith(await browser().request(`${APP}/go/limits/api`, { method: 'POST', body: '{}' }), 401, 'ERR_SERVICE_800');
  });
});

describe('oauth at the edge: forged input and a provider down', () => {
  it('a callback no sign-in was started for, or with another state, is refused with 403 ERR_SERVICE_801', async () => {
    refusedWith(await browser().request(`${CALLBACK}?code=abc&state=${ids['/gl/email']}~forged`), 403, 'ERR_SERVICE_801');
    const b = browser();
    fakes.gitlab.signInAs(ada());
    const callback = new URL(await untilCallback(b, '/gl/email/'));
    callback.searchParams.set('state', `${ids['/gl/email']}~another`);
    refusedWith(await b.request(callback.href), 403, 'ERR_SERVICE_801');
  });

  it('a tampered sign-in cookie is refused at the callback (801); a tampered session cookie is sent to sign in, never upstream', async () => {
    const b = browser();
    fakes.gitlab.signInAs(ada());
    const callback = await untilCallback(b, '/gl/email/');
    const flow = b.cookiesOf(HOST).get('service.signin')!;
    const flip = (v: string, i: number) => v.slice(0, i) + (v[i] === 'A' ? 'B' : 'A') + v.slice(i + 1);
    b.cookiesOf(HOST).set('service.signin', flip(flow, 20));
    refusedWith(await b.request(callback), 403, 'ERR_SERVICE_801');

    const { b: signed } = await visitAs('gitlab', ada(), '/gl/email/');
    const session = signed.cookiesOf(HOST).get('service.session')!;
    signed.cookiesOf(HOST).set('service.session', flip(session, session.length - 5));
    const before = edge.seen.length;
    const r = await signed.request(`${APP}/gl/email/`);
    expect(r.status).toBe(302);
    expect(edge.seen.length).toBe(before);
  });

  it('a replayed code, a code from another browser\'s sign-in (PKCE) and a provider error are refused with 403 ERR_SERVICE_802', async () => {
    fakes.gitlab.signInAs(ada());
    const b = browser();
    const callback = await untilCallback(b, '/gl/email/');
    const flow = b.cookiesOf(HOST).get('service.signin')!;
    expect((await b.follow(callback)).status).toBe(200);
    const replay = browser();
    replay.cookiesOf(HOST).set('service.signin', flow);
    refusedWith(await replay.request(callback), 403, 'ERR_SERVICE_802');

    // The victim's browser started a sign-in; the attacker's code (from their own flow) is injected with the victim's state.
    const victim = browser();
    const victimState = new URL(await untilCallback(victim, '/gl/email/')).searchParams.get('state')!;
    const injected = new URL(await untilCallback(browser(), '/gl/email/'));
    injected.searchParams.set('state', victimState);
    refusedWith(await victim.request(injected.href), 403, 'ERR_SERVICE_802');

    const denied = browser();
    const state = new URL((await denied.request(`${APP}/gl/email/`)).headers.location!).searchParams.get('state')!;
    const r = await denied.request(`${CALLBACK}?error=access_denied&state=${encodeURIComponent(state)}`);
    refusedWith(r, 403, 'ERR_SERVICE_802');
    expect(r.body).toContain('access_denied');
  });

  it('a provider down (503) or silent past the sign-in timeout gets 502 ERR_SERVICE_803, never the backend', async () => {
    const deps = s.server.ingress!.deps;
    const amazon = fakes.amazon;
    amazon.signInAs(ada());
    const before = edge.seen.length;
    try {
      const down = browser();
      const callback = await untilCallback(down, '/p/amazon/');
      amazon.mode = 'down';
      refusedWith(await down.request(callback), 502, 'ERR_SERVICE_803');
      amazon.mode = 'ok';
      const slow = browser();
      const callback2 = await untilCallback(slow, '/p/amazon/');
      amazon.mode = 'silent';
      deps.signInTimeoutMs = 300;
      refusedWith(await slow.request(callback2), 502, 'ERR_SERVICE_803');
    } finally {
      amazon.mode = 'ok';
      delete deps.signInTimeoutMs;
    }
    expect(edge.seen.length).toBe(before);
  });

  it('a provider setting that is not https is refused with 502 ERR_SERVICE_820 naming it', async () => {
    process.env.EDGEFORM_OAUTH_LINKEDIN_TOKEN_URL = 'http://token.example.com';
    try {
      await edge.route('/li/bad', { oauth: { provider: { linkedin: own('linkedin') } } });
      await until(async () => (await browser().request(`${APP}/li/bad/`)).status !== 404);
      const r = await browser().request(`${APP}/li/bad/`);
      refusedWith(r, 502, 'ERR_SERVICE_820');
      expect(r.body).toContain('EDGEFORM_OAUTH_LINKEDIN_TOKEN_URL');
    } finally {
      delete process.env.EDGEFORM_OAUTH_LINKEDIN_TOKEN_URL;
    }
  });
});
