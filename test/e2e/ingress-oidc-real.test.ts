// OIDC sign-in at the edge, end to end: the real server with --ingress, a real OpenID provider
// (oidc-provider on loopback), edgeform agent carrying the route to an upstream that echoes the
// identity headers it got, and a browser-like client following each redirect. Also: a forged
// identity header, a tampered cookie, a state mismatch, a replayed callback, a session past
// maximum_duration on a shifted clock, the logout path and options_passthrough.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser } from '../helpers/browser.js';
import { startOidcIdp, type TestIdp } from '../helpers/oidc-idp.js';
import { clockAhead, startSignInEdge, type SignInEdge } from '../helpers/sign-in-edge.js';
import type { TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const HOST = 'sso.example.com';
const APP = `https://${HOST}`;
const CALLBACK = `${APP}/_edgeform/auth/callback`;
const USER = { sub: 'user-ada', email: 'ada@example.com', name: 'Ada Lovelace' };

let edge: SignInEdge;
let s: TestServer;
let idp: TestIdp;
let ingress: { port: number; ca: string };
let seen: SignInEdge['seen'];
/** An "identity provider" that accepts connections and never answers. */
let silent: net.Server;
const held: net.Socket[] = [];

/** Signs in from `path` and returns the browser, its answer on arrival and the callback URL it used. */
async function signIn(path = '/private') {
  const b = new Browser(ingress);
  let callback = '';
  await b.follow(`${APP}${path}`, (next) => {
    if (next.startsWith(CALLBACK)) callback = next;
    return next.startsWith(CALLBACK);
  });
  const flowCookie = b.cookiesOf(HOST).get('service.signin');
  const back = await b.request(callback);
  const arrived = await b.follow(new URL(back.headers.location!, APP).href);
  return { b, callback, flowCookie, back, arrived };
}

beforeAll(async () => {
  idp = await startOidcIdp({ clientId: 'edge-app', clientSecret: 'oidc-client-secret', redirectUris: [CALLBACK], user: USER });
  edge = await startSignInEdge(HOST, 'sso');
  ({ s, ingress, seen } = edge);
  await edge.route('/', {
    oidc: { issuer: idp.issuer, client_id: 'edge-app', client_secret: 'oidc-client-secret', scopes: ['email', 'profile'], options_passthrough: true, maximum_duration: 3600 },
  });
  silent = net.createServer((socket) => { held.push(socket); });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  await edge.route('/slow', { oidc: { issuer: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, client_id: 'edge-app', client_secret: 'x' } });
  const probe = new Browser(ingress);
  await until(async () => (await probe.request(`${APP}/private`)).status === 302);
}, 60_000);

afterAll(async () => {
  await edge?.close();
  await idp?.close();
  for (const socket of held) socket.destroy();
  await new Promise((r) => silent?.close(r));
});

describe('oidc sign-in at the edge', () => {
  it('sends the browser to the provider with PKCE, state and nonce, and nothing upstream', async () => {
    const before = seen.length;
    const r = await new Browser(ingress).request(`${APP}/private`);
    expect(r.status).toBe(302);
    const to = new URL(r.headers.location!);
    expect(to.origin).toBe(idp.issuer);
    expect(to.searchParams.get('redirect_uri')).toBe(CALLBACK);
    expect(to.searchParams.get('code_challenge_method')).toBe('S256');
    expect(to.searchParams.get('state')).toBeTruthy();
    expect(to.searchParams.get('nonce')).toBeTruthy();
    expect(to.searchParams.get('scope')!.split(' ')).toEqual(expect.arrayContaining(['openid', 'email', 'profile']));
    const cookie = [r.headers['set-cookie']].flat().join('\n');
    expect(cookie).toMatch(/^service\.signin=v1\.[^;]+; Path=\/; HttpOnly; Secure; SameSite=Lax/);
    expect(seen.length).toBe(before);
  });

  it('signs in and the upstream receives the identity, never the edge cookies or a forged header', async () => {
    const { b, back, arrived } = await signIn('/private?x=1');
    expect(back.status).toBe(302);
    expect(back.headers.location).toBe('/private?x=1');
    expect([back.headers['set-cookie']].flat().join('\n')).toMatch(/service\.session=v1\.[^;]+; Path=\/; HttpOnly; Secure; SameSite=Lax; Max-Age=3600/);
    expect(arrived.status).toBe(200);
    const got = JSON.parse(arrived.body);
    expect(got.path).toBe('/private?x=1');
    expect(got.headers).toMatchObject({ 'edgeform-auth-subject': USER.sub, 'edgeform-auth-email': USER.email, 'edgeform-auth-name': encodeURIComponent(USER.name), 'edgeform-auth-provider': 'oidc' });
    expect(got.headers.cookie ?? '').not.toContain('service.');

    const forged = await b.request(`${APP}/who`, { headers: { 'edgeform-auth-email': 'mallory@example.com', 'edgeform-auth-admin': 'yes' } });
    const h = JSON.parse(forged.body).headers;
    expect(h['edgeform-auth-email']).toBe(USER.email);
    expect(h['edgeform-auth-admin']).toBeUndefined();
    // The upstream's own cookie still reaches the browser beside the renewed session.
    expect([forged.headers['set-cookie']].flat().join('\n')).toMatch(/app=1[\s\S]*service\.session=/);
  });

  it('a forged identity header without a session is sent to sign in, not upstream', async () => {
    const before = seen.length;
    const r = await new Browser(ingress).request(`${APP}/private`, { headers: { 'edgeform-auth-email': USER.email, 'edgeform-auth-subject': USER.sub } });
    expect(r.status).toBe(302);
    expect(seen.length).toBe(before);
  });

  it('a tampered session cookie is not accepted', async () => {
    const { b } = await signIn();
    const jar = b.cookiesOf(HOST);
    const v = jar.get('service.session')!;
    const i = v.length - 5;
    jar.set('service.session', v.slice(0, i) + (v[i] === 'A' ? 'B' : 'A') + v.slice(i + 1));
    const before = seen.length;
    const r = await b.request(`${APP}/private`);
    expect(r.status).toBe(302);
    expect(new URL(r.headers.location!).origin).toBe(idp.issuer);
    expect(seen.length).toBe(before);
  });

  it('a state mismatch, a callback with no sign-in started and a replayed callback are refused with a page and a code', async () => {
    const b = new Browser(ingress);
    let callback = '';
    await b.follow(`${APP}/private`, (next) => (callback = next).startsWith(CALLBACK));
    const wrong = new URL(callback);
    wrong.searchParams.set('state', 'not-the-state');
    const mismatch = await b.request(wrong.href);
    expect(mismatch.status).toBe(403);
    expect(mismatch.headers['edgeform-error-code']).toBe('ERR_SERVICE_801');
    expect(mismatch.body).toContain('ERR_SERVICE_801');

    const stranger = await new Browser(ingress).request(callback);
    expect(stranger.status).toBe(403);
    expect(stranger.headers['edgeform-error-code']).toBe('ERR_SERVICE_801');

    const done = await signIn();
    expect(done.arrived.status).toBe(200);
    const replay = new Browser(ingress);
    replay.cookiesOf(HOST).set('service.signin', done.flowCookie!);
    const again = await replay.request(done.callback);
    expect(again.status).toBe(403);
    expect(again.headers['edgeform-error-code']).toBe('ERR_SERVICE_802');
    expect(replay.cookiesOf(HOST).has('service.session')).toBe(false);
  });

  it('a session past maximum_duration is sent to sign in again (shifted clock)', async () => {
    const { b, arrived } = await signIn();
    expect(arrived.status).toBe(200);
    await clockAhead(s, 3601 * 1000, async () => {
      const r = await b.request(`${APP}/private`);
      expect(r.status).toBe(302);
      expect(new URL(r.headers.location!).origin).toBe(idp.issuer);
    });
    expect((await b.request(`${APP}/private`)).status).toBe(200);
  });

  it('a provider that does not answer is given up on with 502 and a code, never the backend', async () => {
    const deps = s.server.ingress!.deps;
    deps.signInTimeoutMs = 300;
    const before = seen.length;
    try {
      const r = await new Browser(ingress).request(`${APP}/slow/page`);
      expect(r.status).toBe(502);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_803');
      expect(r.body).toContain('ERR_SERVICE_803');
    } finally {
      delete deps.signInTimeoutMs;
    }
    expect(seen.length).toBe(before);
  });

  it('logout ends the session; OPTIONS passes unauthenticated with options_passthrough', async () => {
    const { b } = await signIn();
    // A copy of the session cookie taken before logout (another tab, a stolen copy) dies with it: the edge revokes the session, not only this browser's cookie.
    expect((await b.request(`${APP}/private`)).status).toBe(200);
    const kept = b.cookiesOf(HOST).get('service.session')!;
    const copy = new Browser(ingress);
    copy.cookiesOf(HOST).set('service.session', kept);
    expect((await copy.request(`${APP}/private`)).status).toBe(200);
    const out = await b.request(`${APP}/_edgeform/auth/logout`);
    expect(out.status).toBe(200);
    expect(b.cookiesOf(HOST).has('service.session')).toBe(false);
    expect((await b.request(`${APP}/private`)).status).toBe(302);
    const replayed = new Browser(ingress);
    replayed.cookiesOf(HOST).set('service.session', kept);
    const after = await replayed.request(`${APP}/private`);
    expect(after.status).toBe(302);
    expect(JSON.stringify(after.headers)).not.toContain(kept);
    // The copy renewed its cookie meanwhile: that one ends too (one session, one id).
    expect((await copy.request(`${APP}/private`)).status).toBe(302);
    const pre = await new Browser(ingress).request(`${APP}/private`, { method: 'OPTIONS' });
    expect(pre.status).toBe(200);
    const post = await new Browser(ingress).request(`${APP}/private`, { method: 'POST', body: '{}' });
    expect(post.status).toBe(401);
    expect(post.headers['edgeform-error-code']).toBe('ERR_SERVICE_800');
  });
});
