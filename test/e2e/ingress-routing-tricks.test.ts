// Routing tricks against the real listener, with a real `edgeform agent` relaying to a local
// upstream that records what reaches it: a Host whose port part is not the listener's public
// port, and spellings of a guarded path (`//admin`, `/ADMIN`, `\`, `%2f`, `;x`, a trailing
// slash) sent through the broader open route. The edge a.example.com has `/` open, and
// `/admin` (prefix) and `/exact` (exact_path) behind an ip_restriction that denies loopback.
// Each spelling is either read in its normal form (and then the guarded route refuses it with
// 403), or refused at the edge with 400 ERR_SERVICE_864; none reaches the upstream.
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { exchange, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let port: number;
let ca: string;
let upstream: http.Server;
let agent: AgentProcess;
const reached: { url: string; host?: string; forwardedHost?: string }[] = [];

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    reached.push({ url: String(req.url), host: req.headers.host, forwardedHost: String(req.headers['x-forwarded-host']) });
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`upstream ${req.url}`);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }], agentHeartbeatMs: 2000 });
  port = ingressPort(s, 443);
  ca = localCa(s);
  const cr = await credentialToken(s);
  agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=tricks', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const group = await s.post('/backends/tunnel_group', { labels: { app: 'tricks' } });
  const policy = await s.post('/ip_policies', {});
  await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: '127.0.0.0/8', action: 'deny' });
  const edge = await s.post('/edges/https', { hostports: ['a.example.com:443'] });
  const route = (match: string, matchType: string, guarded: boolean) => s.post(`/edges/https/${edge.body.id}/routes`, {
    match_type: matchType, match, backend: { backend_id: group.body.id }, ...(guarded ? { ip_restriction: { ip_policy_ids: [policy.body.id] } } : {}),
  });
  await route('/', 'path_prefix', false);
  await route('/admin', 'path_prefix', true);
  await route('/exact', 'exact_path', true);
}, 60_000);

afterAll(async () => {
  agent?.kill();
  await s?.close().catch(() => {});
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

const h1 = () => tlsConnect(port, { servername: 'a.example.com', ca, ALPNProtocols: ['http/1.1'] });

/** One HTTP/1.1 request as raw bytes: the status and the edge's code. */
async function raw(target: string, host = 'a.example.com'): Promise<{ status: number; code?: string; text: string }> {
  const r = await exchange(await h1(), `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, { quietMs: 3000 });
  return { status: Number(r.text.split(' ')[1]), code: /edgeform-error-code: (\S+)/i.exec(r.text)?.[1], text: r.text };
}

/** One HTTP/2 request on a new session. */
function h2(headers: http2.OutgoingHttpHeaders): Promise<{ status: number; code?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect('https://a.example.com', { createConnection: () => tls.connect({ host: '127.0.0.1', port, servername: 'a.example.com', ca, ALPNProtocols: ['h2'] }) });
    session.on('error', reject);
    const stream = session.request({ ':authority': 'a.example.com', ...headers });
    let head: http2.IncomingHttpHeaders = {};
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (h) => { head = h; });
    stream.on('data', (c) => { body += c; });
    stream.on('end', () => { session.close(); resolve({ status: Number(head[':status']), code: head['edgeform-error-code'] as string | undefined, body }); });
    stream.on('error', reject);
  });
}

describe('the Host port', () => {
  it.each([
    ['a userinfo-looking port', 'a.example.com:x@evil.example'],
    ['a port other than the public port', 'a.example.com:8443'],
    ['a port that is not digits', 'a.example.com:443x'],
  ])('HTTP/1.1: %s is 400 ERR_SERVICE_860 and reaches no upstream', async (_why, host) => {
    reached.length = 0;
    const r = await raw('/page', host);
    expect(r).toMatchObject({ status: 400, code: 'ERR_SERVICE_860' });
    expect(reached).toEqual([]);
  });

  it('HTTP/2: an :authority with a userinfo-looking port is 400 ERR_SERVICE_860', async () => {
    reached.length = 0;
    expect(await h2({ ':path': '/page', ':authority': 'a.example.com:x@evil.example' })).toMatchObject({ status: 400, code: 'ERR_SERVICE_860' });
    expect(await h2({ ':path': '/page', ':authority': 'a.example.com:8443' })).toMatchObject({ status: 400, code: 'ERR_SERVICE_860' });
    expect(reached).toEqual([]);
  });

  it('the public port, or none, is served and goes upstream as sent', async () => {
    reached.length = 0;
    expect((await raw('/page', 'a.example.com:443')).status).toBe(200);
    expect((await raw('/page', 'a.example.com')).status).toBe(200);
    expect((await h2({ ':path': '/page', ':authority': 'a.example.com:443' })).status).toBe(200);
    expect(reached.map((x) => [x.host, x.forwardedHost])).toEqual([['a.example.com:443', 'a.example.com:443'], ['a.example.com', 'a.example.com'], ['a.example.com:443', 'a.example.com:443']]);
  });
});

describe('spellings of a guarded path', () => {
  const cases: [string, string, number, string?][] = [
    ['a doubled slash is merged: the guarded route refuses it', '//admin/x', 403],
    ['slashes inside are merged too', '/x/..//admin', 403],
    ['another case would be the guarded route to a case-insensitive upstream', '/ADMIN/x', 400, 'ERR_SERVICE_864'],
    ['a backslash', '/x\\admin', 400, 'ERR_SERVICE_864'],
    ['an escaped slash', '/x/..%2fadmin', 400, 'ERR_SERVICE_864'],
    ['an escaped backslash', '/x/..%5Cadmin', 400, 'ERR_SERVICE_864'],
    ['a dot-dot segment with parameters', '/x/..;/admin', 400, 'ERR_SERVICE_864'],
    ['path parameters on an exact path', '/exact;x', 400, 'ERR_SERVICE_864'],
    ['a trailing slash on an exact path', '/exact/', 400, 'ERR_SERVICE_864'],
    ['an escaped letter is decoded: the guarded route refuses it', '/%61dmin', 403],
  ];

  it.each(cases)('HTTP/1.1: %s (%s)', async (_why, target, status, code) => {
    reached.length = 0;
    const r = await raw(target);
    expect(r.status).toBe(status);
    if (code) expect(r.code).toBe(code);
    expect(reached).toEqual([]);
  });

  it.each(cases.filter(([, target]) => !target.includes('\\')))('HTTP/2: %s (%s)', async (_why, target, status, code) => {
    reached.length = 0;
    const r = await h2({ ':path': target });
    expect(r.status).toBe(status);
    if (code) expect(r.code).toBe(code);
    expect(reached).toEqual([]);
  });

  it('HTTP/2: a backslash is refused', async () => {
    reached.length = 0;
    expect(await h2({ ':path': '/x\\admin' })).toMatchObject({ status: 400, code: 'ERR_SERVICE_864' });
    expect(reached).toEqual([]);
  });

  it('the upstream gets exactly the path the route was chosen on', async () => {
    reached.length = 0;
    expect((await raw('//a//b/./c/../d?q=1')).status).toBe(200);
    expect((await h2({ ':path': '//a//b/./c/../d?q=1' })).status).toBe(200);
    expect((await raw('/Photos/A.png')).status).toBe(200);
    expect((await raw('/page;jsessionid=1')).status).toBe(200);
    expect(reached.map((x) => x.url)).toEqual(['/a/b/d?q=1', '/a/b/d?q=1', '/Photos/A.png', '/page;jsessionid=1']);
  });
});
