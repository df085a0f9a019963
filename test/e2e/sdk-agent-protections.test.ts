// Issue 30, "What a bind asks for": the protections the SDK asks for on its endpoint are
// enforced by the ingress, each as the route module that enforces it on an edge's route (basic
// auth as the ingress's basic_auth module, which only agents' endpoints have). The real
// @ngrok/ngrok SDK binds each, and a request (or connection) without what the protection asks
// for is refused, one with it answered. A protection edgeform does not enforce (mutual TLS)
// still refuses the bind, with an error the SDK shows.
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, tunnels } from '../helpers/agent.js';
import { Browser } from '../helpers/browser.js';
import { startFakeOAuth, type FakeOAuth } from '../helpers/fake-oauth.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startOidcIdp, type TestIdp } from '../helpers/oidc-idp.js';
import { twoFreePorts } from '../helpers/ports.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';

const within = <T>(p: Promise<T>, ms = 15_000, what = 'the SDK call') =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms).unref())]);

const APP = { clientId: 'sdk-oauth-app', clientSecret: 'sdk-oauth-secret' };
const OIDC_HOST = 'oidc-sdk.example.com';
const OIDC_DENIED_HOST = 'oidc-sdk-denied.example.com';

let s: TestServer;
let session: ngrok.Session;
let ca: string;
let ingressPort: number;
let tcpFirst: number;
let upstream: http.Server;
let upstreamUrl: string;
let echo: net.Server;
let gitlab: FakeOAuth;
let idp: TestIdp;
const savedEnv = { ...process.env };

beforeAll(async () => {
  upstream = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url, headers: req.headers })));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  echo = net.createServer((c) => c.pipe(c));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  gitlab = await startFakeOAuth('gitlab', APP);
  Object.assign(process.env, gitlab.env);
  idp = await startOidcIdp({
    clientId: 'sdk-oidc', clientSecret: 'sdk-oidc-secret', redirectUris: [`https://${OIDC_HOST}/_edgeform/auth/callback`, `https://${OIDC_DENIED_HOST}/_edgeform/auth/callback`],
    user: { sub: 'ada', email: 'ada@example.com', name: 'Ada Lovelace' },
  });
  tcpFirst = await twoFreePorts();
  s = await startTestServer({
    agentHeartbeatMs: 2000, agentListen: { host: '127.0.0.1', port: 0 }, agentTcpPorts: { first: tcpFirst, last: tcpFirst + 1 },
    ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }],
  });
  ingressPort = Number(s.server.ingress!.listeners[0].address.split(':').pop());
  ca = fs.readFileSync(s.server.agentListener!.caFile, 'utf8');
  const { token } = await credentialToken(s);
  session = await within(new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${s.server.agentListener!.address.split(':').pop()}`).caCert(Buffer.from(ca)).connect(), 15_000, 'connect()');
});

afterAll(async () => {
  await within(session?.close(), 5000).catch(() => {});
  for (const k of Object.keys(process.env)) if (k.startsWith('EDGEFORM_OAUTH_') && !(k in savedEnv)) delete process.env[k];
  upstream?.close();
  echo?.close();
  await gitlab?.close();
  await idp?.close();
  await s?.close().catch(() => {});
  removeTempDirs();
});

const hostOf = (l: ngrok.Listener) => new URL(l.url()!).hostname;
const get = (host: string, headers: Record<string, string> = {}, path = '/') => edgeRequest({ port: ingressPort, host, path, ca, headers });
const bindError = (p: Promise<unknown>) => within(p, 15_000, 'listen').then(() => undefined, (e: Error) => e);
const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

describe('basic auth (basicAuth)', () => {
  it('a request without the credentials is 401 with WWW-Authenticate; a wrong password is 401; the right one is answered', async () => {
    const l = await within(session.httpEndpoint().basicAuth('ada', 'correct horse').basicAuth('bob', 'battery staple').listenAndForward(upstreamUrl), 15_000, 'listen');
    const host = hostOf(l);
    const none = await get(host);
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic realm="edgeform"/);
    expect(none.text).toContain('ERR_SERVICE_788');
    expect((await get(host, basic('ada', 'correct horsE'))).status).toBe(401);
    expect((await get(host, basic('bob', 'correct horse'))).status).toBe(401);
    expect((await get(host, { authorization: 'Basic !!!not base64' })).status).toBe(401);
    const ok = await get(host, basic('ada', 'correct horse'), '/in');
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text).path).toBe('/in');
    expect((await get(host, basic('bob', 'battery staple'))).status).toBe(200);
  });

  it('a password under 8 characters refuses the bind (the service\'s bound), and nothing is bound', async () => {
    const before = (await tunnels(s)).length;
    const err = await bindError(session.httpEndpoint().basicAuth('ada', 'short').listenAndForward(upstreamUrl));
    expect(err?.message).toMatch(/ERR_SERVICE_103/);
    expect(err?.message).toMatch(/8 to 128 characters/);
    expect((await tunnels(s)).length).toBe(before);
  });
});

describe('IP restrictions (allowCidr, denyCidr) without stored IP policies', () => {
  it('http: an address outside allow_cidrs is 403 ERR_SERVICE_780; one inside is answered; deny beats allow', async () => {
    const outside = await within(session.httpEndpoint().allowCidr('10.0.0.0/8').listenAndForward(upstreamUrl), 15_000, 'listen');
    const refused = await get(hostOf(outside));
    expect([refused.status, refused.text.includes('ERR_SERVICE_780')]).toEqual([403, true]);
    const inside = await within(session.httpEndpoint().allowCidr('127.0.0.0/8').listenAndForward(upstreamUrl), 15_000, 'listen');
    expect((await get(hostOf(inside))).status).toBe(200);
    const denied = await within(session.httpEndpoint().allowCidr('127.0.0.0/8').denyCidr('127.0.0.1/32').listenAndForward(upstreamUrl), 15_000, 'listen');
    expect((await get(hostOf(denied))).status).toBe(403);
  });

  it('tcp: a denied address is closed before it reaches the agent; an allowed one is relayed', async () => {
    const denied = await within(session.tcpEndpoint().denyCidr('127.0.0.0/8').listenAndForward(`tcp://127.0.0.1:${(echo.address() as AddressInfo).port}`), 15_000, 'tcp listen');
    expect(await echoThrough(Number(new URL(denied.url()!).port), 'refused?')).toBe('');
    await within(denied.close(), 5000, 'close');
    const allowed = await within(session.tcpEndpoint().allowCidr('127.0.0.1/32').listenAndForward(`tcp://127.0.0.1:${(echo.address() as AddressInfo).port}`), 15_000, 'tcp listen');
    expect(await echoThrough(Number(new URL(allowed.url()!).port), 'through')).toBe('through');
  });

  it('tls: a denied address is closed before its TLS reaches the agent; an allowed one passes through', async () => {
    let reached = 0;
    const counting = net.createServer((c) => { reached++; c.destroy(); });
    await new Promise<void>((r) => counting.listen(0, '127.0.0.1', r));
    const to = `tcp://127.0.0.1:${(counting.address() as AddressInfo).port}`;
    await within(session.tlsEndpoint().domain('tls-denied.example.com').denyCidr('127.0.0.0/8').listenAndForward(to), 15_000, 'tls listen');
    await within(session.tlsEndpoint().domain('tls-allowed.example.com').allowCidr('127.0.0.0/8').listenAndForward(to), 15_000, 'tls listen');
    const hello = (servername: string) => within(new Promise<void>((resolve) => {
      const c = tls.connect({ host: '127.0.0.1', port: ingressPort, servername, rejectUnauthorized: false });
      c.on('error', () => resolve());
      c.on('close', () => resolve());
    }), 10_000, 'the TLS attempt');
    await hello('tls-denied.example.com');
    expect(reached).toBe(0);
    await hello('tls-allowed.example.com');
    expect(reached).toBe(1);
    counting.close();
  });

  it('a CIDR that does not parse refuses the bind', async () => {
    const err = await bindError(session.httpEndpoint().allowCidr('10.0.0.1/8').listenAndForward(upstreamUrl));
    expect(err?.message).toMatch(/ERR_SERVICE_103/);
    expect(err?.message).toMatch(/host bits set/);
  });
});

describe('OAuth (oauth) and OIDC (oidc) as the oauth and oidc modules', () => {
  it('oauth: a browser is sent to the provider; an allowed user reaches the upstream with the identity headers; another is refused', async () => {
    const l = await within(session.httpEndpoint().oauth('gitlab', ['ada@example.com'], [], [], APP.clientId, APP.clientSecret).listenAndForward(upstreamUrl), 15_000, 'listen');
    const host = hostOf(l);
    const b = new Browser({ port: ingressPort, ca });
    const first = await b.request(`https://${host}/private`);
    expect(first.status).toBe(302);
    expect(first.headers.location).toContain(gitlab.base);
    gitlab.signInAs({ id: 7, login: 'ada', name: 'Ada Lovelace', email: 'ada@example.com' });
    const r = await b.follow(first.headers.location!);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).headers).toMatchObject({ 'edgeform-auth-provider': 'gitlab', 'edgeform-auth-email': 'ada@example.com' });
    // A POST without a session is refused, not sent to sign in.
    const post = await edgeRequest({ port: ingressPort, host, path: '/private', method: 'POST', body: 'x', ca });
    expect(post.status).toBe(401);
    gitlab.signInAs({ id: 8, login: 'eve', name: 'Eve', email: 'eve@example.com' });
    const eve = await new Browser({ port: ingressPort, ca }).follow(`https://${host}/private`);
    expect(eve.status).toBe(403);
    expect(eve.body).toContain('ERR_SERVICE_804');
  });

  it('oauth: a provider the server does not sign in with refuses the bind', async () => {
    const err = await bindError(session.httpEndpoint().oauth('myspace').listenAndForward(upstreamUrl));
    expect(err?.message).toMatch(/ERR_SERVICE_112/);
  });

  it('oidc: an allowed user signs in at the issuer and reaches the upstream; allow_emails that do not list them refuse them', async () => {
    const l = await within(session.httpEndpoint().domain(OIDC_HOST).oidc(idp.issuer, 'sdk-oidc', 'sdk-oidc-secret', ['ada@example.com']).listenAndForward(upstreamUrl), 15_000, 'listen');
    expect(hostOf(l)).toBe(OIDC_HOST);
    const b = new Browser({ port: ingressPort, ca });
    const first = await b.request(`https://${OIDC_HOST}/inside`);
    expect(first.status).toBe(302);
    expect(first.headers.location).toContain(idp.issuer);
    const r = await b.follow(first.headers.location!);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ path: '/inside', headers: { 'edgeform-auth-provider': 'oidc', 'edgeform-auth-email': 'ada@example.com' } });

    await within(session.httpEndpoint().domain(OIDC_DENIED_HOST).oidc(idp.issuer, 'sdk-oidc', 'sdk-oidc-secret', ['grace@example.com'], ['example.org']).listenAndForward(upstreamUrl), 15_000, 'listen');
    const denied = await new Browser({ port: ingressPort, ca }).follow(`https://${OIDC_DENIED_HOST}/inside`);
    expect(denied.status).toBe(403);
    expect(denied.body).toContain('ERR_SERVICE_804');
  });
});

describe('what edgeform does not enforce on an endpoint is refused', () => {
  it('mutual TLS (mutualTlsca) refuses the bind with an error the SDK shows, and nothing is bound', async () => {
    const before = (await tunnels(s)).length;
    const err = await bindError(session.httpEndpoint().mutualTlsca(Buffer.from('not used')).listenAndForward(upstreamUrl));
    expect(err?.message).toMatch(/does not enforce mutual_tls/);
    expect(err?.message).toMatch(/ERR_SERVICE_112/);
    expect((await tunnels(s)).length).toBe(before);
  });
});

/** Sends `text` to the TCP endpoint's port and reads until the connection ends (bounded). */
function echoThrough(port: number, text: string): Promise<string> {
  return within(new Promise<string>((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => c.write(text));
    let got = '';
    c.on('data', (d) => {
      got += d;
      if (got.length >= text.length) c.end();
    });
    c.on('close', () => resolve(got));
    c.on('error', () => resolve(got));
  }), 10_000, 'the TCP exchange');
}
