// The HTTP side behind the real `--ingress` listener, as a user drives it: resources created
// through the API, `edgeform agent` serving a local upstream, clients over TLS with the
// server's local CA: routes and their 404 pages, a tunnel-group route with the forwarding
// headers, a rate limit's sixth request, header modules, a weighted backend, a WebSocket
// through the tunnel, and a change through the API live on the next request.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const RATE_LIMIT = `on_http_request:
  - actions:
      - type: rate-limit
        config: { name: five per minute, algorithm: sliding_window, capacity: 5, rate: 60s, bucket_key: [conn.client_ip] }
`;

let s: TestServer;
let port: number;
let ca: string;
let upstream: http.Server;
let agent: AgentProcess;
let edgeId: string;
let helloId: string;
const get = (path: string, headers?: Record<string, string>) => edgeRequest({ port, host: 'app.example.com', path, ca, headers });

async function created(path: string, body: unknown): Promise<string> {
  const r = await s.post(path, body);
  if (r.status !== 201) throw new Error(`${path}: ${r.status} ${r.text}`);
  return r.body.id;
}

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
  port = ingressPort(s, 443);
  ca = localCa(s);
  upstream = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json', 'x-internal': 'yes' }).end(JSON.stringify({ url: req.url, headers: req.headers })));
  upstream.on('upgrade', (req, socket) => {
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Path: ${req.url}\r\n\r\n`);
    socket.pipe(socket);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const cr = await credentialToken(s);
  agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=web', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const web = await created('/backends/tunnel_group', { labels: { app: 'web' } });
  helloId = await created('/backends/http_response', { body: 'hello', status_code: 200, headers: {} });
  const other = await created('/backends/http_response', { body: 'other', status_code: 200, headers: {} });
  const never = await created('/backends/http_response', { body: 'never', status_code: 200, headers: {} });
  const split = await created('/backends/weighted', { backends: { [helloId]: 1, [other]: 1, [never]: 0 } });
  edgeId = await created('/edges/https', { hostports: ['app.example.com:443'] });
  const route = (match: string, modules: Record<string, unknown>, matchType = 'path_prefix') => created(`/edges/https/${edgeId}/routes`, { match_type: matchType, match, ...modules });
  await route('/api', {
    backend: { backend_id: web },
    request_headers: { add: { 'x-added': 'by-edge' }, remove: ['x-drop-me'] },
    response_headers: { add: { 'x-frame-options': 'DENY' }, remove: ['x-internal'] },
  });
  await route('/limited', { backend: { backend_id: helloId }, traffic_policy: { value: RATE_LIMIT } });
  await route('/split', { backend: { backend_id: split } });
  await route('/ws', { backend: { backend_id: web } });
  await route('/exact', { backend: { backend_id: helloId } }, 'exact_path');
});

afterAll(async () => {
  agent?.kill();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  await s?.close();
});

describe('the HTTP side behind --ingress', () => {
  it('a tunnel-group route reaches the upstream through edgeform agent with the forwarding headers and header modules', async () => {
    const r = await get('/api/users?page=2', { 'x-drop-me': '1' });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.text);
    expect(seen.url).toBe('/api/users?page=2');
    expect(seen.headers).toMatchObject({ host: 'app.example.com', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-for': '127.0.0.1', 'x-added': 'by-edge' });
    expect(seen.headers['x-drop-me']).toBeUndefined();
    expect(r.headers['x-frame-options']).toBe('DENY');
    expect(r.headers['x-internal']).toBeUndefined();
  });

  it('a path no route matches, and an exact_path asked with more: 404 pages with ERR_SERVICE_741', async () => {
    for (const path of ['/nothing', '/exact/more']) {
      const r = await get(path);
      expect(r.status).toBe(404);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_741');
    }
    expect((await get('/exact')).text).toBe('hello');
  });

  it('a rate limit of 5 per 60 s answers the sixth request 429 with retry-after', async () => {
    for (let i = 0; i < 5; i++) expect((await get('/limited')).status).toBe(200);
    const sixth = await get('/limited');
    expect(sixth.status).toBe(429);
    expect(Number(sixth.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('a weighted backend answers from its children by weight, never the one weighted 0', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) seen.add((await get('/split')).text);
    expect([...seen].sort()).toEqual(['hello', 'other']);
  });

  it('a WebSocket upgrade over TLS passes through the tunnel both ways', async () => {
    const socket = await tlsConnect(port, { servername: 'app.example.com', ca });
    let got = '';
    socket.on('data', (c) => { got += c.toString('latin1'); });
    socket.write('GET /ws/room HTTP/1.1\r\nHost: app.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
    await until(() => got.includes('\r\n\r\n'), 10_000);
    expect(got).toMatch(/^HTTP\/1\.1 101/);
    expect(got).toContain('X-Path: /ws/room');
    got = '';
    socket.write('both-ways');
    await until(() => got.includes('both-ways'), 10_000);
    socket.destroy();
  });

  it('a change through the API is live on the next request', async () => {
    expect((await get('/later')).status).toBe(404);
    await created(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: '/later', backend: { backend_id: helloId } });
    const r = await get('/later');
    expect(r).toMatchObject({ status: 200, text: 'hello' });
  });

  it('writes one access-log line per request with the route and status', async () => {
    await get('/exact');
    const lines = s.logs.filter((l) => l.includes('"ingress request"') && l.includes('"path":"/exact"')).map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.at(-1)).toMatchObject({ edge: edgeId, status: 200, client_ip: '127.0.0.1', bytes: 5 });
  });

  it('logs no body bytes for a HEAD request, whose answer carries none', async () => {
    const r = await edgeRequest({ port, host: 'app.example.com', path: '/exact', ca, method: 'HEAD' });
    expect(r).toMatchObject({ status: 200, text: '' });
    await until(() => s.logs.some((l) => l.includes('"method":"HEAD"') && l.includes('"path":"/exact"')), 5000);
    expect(JSON.parse(s.logs.find((l) => l.includes('"method":"HEAD"') && l.includes('"path":"/exact"'))!)).toMatchObject({ status: 200, bytes: 0 });
  });
});
