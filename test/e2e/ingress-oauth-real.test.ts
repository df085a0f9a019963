// OAuth with GitHub at the edge, end to end: the real server with --ingress, a local fake of
// GitHub's documented OAuth and REST endpoints (pointed at by EDGEFORM_OAUTH_GITHUB_URL and
// EDGEFORM_OAUTH_GITHUB_API_URL), edgeform agent to an upstream echoing the identity headers,
// and a browser-like client. Each allow list admits one user and refuses another with a page
// and a code; a route without client_id and no managed app is refused with a clear page.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser } from '../helpers/browser.js';
import { startFakeGithub, type FakeGithub, type FakeGithubUser } from '../helpers/fake-github.js';
import type { TestServer } from '../helpers/server.js';
import { clockAhead, startSignInEdge, type SignInEdge } from '../helpers/sign-in-edge.js';
import { until } from '../helpers/wait.js';

const HOST = 'gh.example.com';
const APP = `https://${HOST}`;
const APP_CREDS = { clientId: 'Iv1.edge', clientSecret: 'gh-client-secret' };
const ADA: FakeGithubUser = { id: 1001, login: 'ada', name: 'Ada Lovelace', emails: [{ email: 'ada@example.com', primary: true, verified: true }], orgs: ['edgeform'], teams: ['edgeform/core'] };
const EVE: FakeGithubUser = { id: 1002, login: 'eve', name: 'Eve', emails: [{ email: 'eve@evil.test', primary: true, verified: true }, { email: 'ada2@example.com', primary: false, verified: false }], orgs: ['other'], teams: ['other/core'] };

let edge: SignInEdge;
let s: TestServer;
let gh: FakeGithub;
let ingress: { port: number; ca: string };
const saved = { url: process.env.EDGEFORM_OAUTH_GITHUB_URL, api: process.env.EDGEFORM_OAUTH_GITHUB_API_URL };

/** A fresh browser signed in as `user` from `path`: the final answer. */
async function visitAs(user: FakeGithubUser, path: string) {
  gh.signInAs(user);
  const b = new Browser(ingress);
  return { b, r: await b.follow(`${APP}${path}`) };
}

beforeAll(async () => {
  gh = await startFakeGithub(APP_CREDS);
  process.env.EDGEFORM_OAUTH_GITHUB_URL = gh.base;
  process.env.EDGEFORM_OAUTH_GITHUB_API_URL = gh.api;
  delete process.env.EDGEFORM_OAUTH_GITHUB_CLIENT_ID;
  edge = await startSignInEdge(HOST, 'gh');
  ({ s, ingress } = edge);
  const route = (match: string, github: Record<string, unknown>, more: Record<string, unknown> = {}) => edge.route(match, { oauth: { provider: { github }, ...more } });
  const own = { client_id: APP_CREDS.clientId, client_secret: APP_CREDS.clientSecret };
  await route('/by-email', { ...own, email_addresses: ['ADA@example.com'] });
  await route('/by-domain', { ...own, email_domains: ['example.com'] });
  await route('/by-org', { ...own, organizations: ['edgeform'] });
  await route('/by-team', { ...own, teams: ['edgeform/core'] });
  await route('/recheck', { ...own, organizations: ['edgeform'] }, { auth_check_interval: 60 });
  await route('/managed', {});
  await until(async () => (await new Browser(ingress).request(`${APP}/managed`)).status === 501);
}, 60_000);

afterAll(async () => {
  await edge?.close();
  await gh?.close();
  for (const [k, v] of [['EDGEFORM_OAUTH_GITHUB_URL', saved.url], ['EDGEFORM_OAUTH_GITHUB_API_URL', saved.api]] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

describe('oauth (github) sign-in at the edge', () => {
  it('sends the browser to GitHub\'s authorize endpoint with the fixed callback and the scopes it needs', async () => {
    const r = await new Browser(ingress).request(`${APP}/by-org/x`);
    expect(r.status).toBe(302);
    const to = new URL(r.headers.location!);
    expect(to.origin + to.pathname).toBe(`${gh.base}/login/oauth/authorize`);
    expect(to.searchParams.get('client_id')).toBe(APP_CREDS.clientId);
    expect(to.searchParams.get('redirect_uri')).toBe(`${APP}/_edgeform/auth/callback`);
    expect(to.searchParams.get('scope')!.split(' ')).toEqual(expect.arrayContaining(['read:user', 'user:email', 'read:org']));
  });

  it.each([
    ['/by-email', 'email_addresses'],
    ['/by-domain', 'email_domains'],
    ['/by-org', 'organizations'],
    ['/by-team', 'teams'],
  ])('%s: %s admits ada with her identity upstream and refuses eve with 403 and a code', async (path) => {
    const ok = await visitAs(ADA, `${path}/page`);
    expect(ok.r.status).toBe(200);
    const got = JSON.parse(ok.r.body);
    expect(got.path).toBe(`${path}/page`);
    expect(got.headers).toMatchObject({ 'edgeform-auth-provider': 'github', 'edgeform-auth-subject': '1001', 'edgeform-auth-email': 'ada@example.com', 'edgeform-auth-name': 'Ada%20Lovelace' });

    const no = await visitAs(EVE, `${path}/page`);
    expect(no.r.status).toBe(403);
    expect(no.r.headers['edgeform-error-code']).toBe('ERR_SERVICE_804');
    expect(no.r.body).toContain('eve');
    expect(no.r.body).not.toContain('"headers"');
    expect(no.b.cookiesOf(HOST).has('service.session')).toBe(false);
  });

  it('a session on one route does not open another; logout under the route ends it', async () => {
    const { b } = await visitAs(ADA, '/by-email/');
    expect((await b.request(`${APP}/by-domain/`)).status).toBe(302);
    expect((await b.request(`${APP}/by-email/`)).status).toBe(200);
    expect((await b.request(`${APP}/by-email/_edgeform/auth/logout`)).status).toBe(200);
    expect((await b.request(`${APP}/by-email/`)).status).toBe(302);
  });

  it('a replayed code is refused by GitHub and the edge answers 403 with a code', async () => {
    gh.signInAs(ADA);
    const b = new Browser(ingress);
    let callback = '';
    await b.follow(`${APP}/by-email/`, (next) => (callback = next).includes('/_edgeform/auth/callback'));
    const flow = b.cookiesOf(HOST).get('service.signin')!;
    expect((await b.follow(callback)).status).toBe(200);
    const replay = new Browser(ingress);
    replay.cookiesOf(HOST).set('service.signin', flow);
    const again = await replay.request(callback);
    expect(again.status).toBe(403);
    expect(again.headers['edgeform-error-code']).toBe('ERR_SERVICE_802');
  });

  it('auth_check_interval: a user who left the organisation loses the session at the next check (shifted clock)', async () => {
    const carol: FakeGithubUser = { ...ADA, id: 1003, login: 'carol', orgs: ['edgeform'], teams: [] };
    const { b, r } = await visitAs(carol, '/recheck/');
    expect(r.status).toBe(200);
    carol.orgs = [];
    // Within the interval the session stands without asking GitHub.
    expect((await b.request(`${APP}/recheck/`)).status).toBe(200);
    await clockAhead(s, 61_000, async () => {
      const gone = await b.request(`${APP}/recheck/`);
      expect(gone.status).toBe(403);
      expect(gone.headers['edgeform-error-code']).toBe('ERR_SERVICE_804');
      expect(gone.body).toContain('carol');
      expect(b.cookiesOf(HOST).has('service.session')).toBe(false);
    });
  });

  it('a route without client_id on a server with no managed app gets a clear 501 page', async () => {
    const r = await new Browser(ingress).request(`${APP}/managed`);
    expect(r.status).toBe(501);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_805');
    expect(r.body).toContain('EDGEFORM_OAUTH_GITHUB_CLIENT_ID');
  });
});
