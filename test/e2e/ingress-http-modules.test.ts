// The HTTP side's route modules over real sockets (handler driven from a plain listener):
// traffic_policy (rate limit 5 per 60 s, the sixth 429 with retry-after; response phase),
// request_headers and response_headers, circuit_breaker, compression, websocket_tcp_converter
// through the real `edgeform agent`, and `enabled: false` skipping a module.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { route, startHttpIngress, tableOf, type HttpIngress, type TableSpec } from '../helpers/ingress-http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';
import { encodeFrame, OP } from '../../server/ingress/modules/websocket-frames.js';

const RATE_LIMIT = `on_http_request:
  - actions:
      - type: rate-limit
        config: { name: five per minute, algorithm: sliding_window, capacity: 5, rate: 60s, bucket_key: [conn.client_ip] }
on_http_response:
  - expressions: ["res.status_code == 200"]
    actions:
      - type: add-headers
        config: { headers: { x-policy: response-phase } }
`;
const BIG = 'edgeform compresses this line. '.repeat(200);

let s: TestServer;
let ing: HttpIngress;
let upstream: http.Server;
let echo: net.Server;
const agents: AgentProcess[] = [];
let spec: TableSpec;
const be = (id: string) => ({ backend: { enabled: true, backend_id: id } });

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000 });
  upstream = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json', 'x-internal': 'secret-upstream' }).end(JSON.stringify(req.headers)));
  echo = net.createServer((c) => c.pipe(c));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const cr = await credentialToken(s);
  const agent = (label: string, port: number) => {
    const p = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', label, '--forwards-to', `127.0.0.1:${port}`]);
    agents.push(p);
    return p.waitFor('online: tn_');
  };
  await Promise.all([agent('app=web', (upstream.address() as AddressInfo).port), agent('app=tcp', (echo.address() as AddressInfo).port)]);
  spec = {
    edges: [{ id: 'edghts_app', hostports: ['app.example.com:443'], routes: [
      route('edghtsrt_limited', '/limited', { ...be('bkdhr_ok'), traffic_policy: { enabled: true, value: RATE_LIMIT } }),
      route('edghtsrt_unlimited', '/unlimited', { ...be('bkdhr_ok'), traffic_policy: { enabled: false, value: RATE_LIMIT } }),
      route('edghtsrt_headers', '/headers', {
        ...be('bkdtg_web'),
        request_headers: { enabled: true, add: { 'X-Added': 'by-edge', 'X-Forwarded-Host': 'rewritten' }, remove: ['x-drop-me'] },
        response_headers: { enabled: true, add: { 'X-Frame-Options': 'DENY' }, remove: ['x-internal'] },
      }),
      route('edghtsrt_breaker', '/breaker', { ...be('bkdtg_nobody'), circuit_breaker: { enabled: true, tripped_duration: 60, rolling_window: 10, num_buckets: 10, volume_threshold: 3, error_threshold_percentage: 0.5 } }),
      route('edghtsrt_big', '/big', { ...be('bkdhr_big'), compression: { enabled: true } }),
      route('edghtsrt_small', '/small', { ...be('bkdhr_ok'), compression: { enabled: true } }),
      route('edghtsrt_png', '/png', { ...be('bkdhr_png'), compression: { enabled: true } }),
      route('edghtsrt_ws', '/ws', { ...be('bkdtg_tcp'), websocket_tcp_converter: { enabled: true } }),
    ] }],
    backends: [
      { id: 'bkdhr_ok', kind: 'HTTPResponseBackend', status_code: 200, body: 'ok', headers: {} },
      { id: 'bkdhr_big', kind: 'HTTPResponseBackend', status_code: 200, body: BIG, headers: { 'content-type': 'text/plain' } },
      { id: 'bkdhr_png', kind: 'HTTPResponseBackend', status_code: 200, body: BIG, headers: { 'content-type': 'image/png' } },
      { id: 'bkdtg_web', kind: 'TunnelGroupBackend', labels: { app: 'web' } },
      { id: 'bkdtg_tcp', kind: 'TunnelGroupBackend', labels: { app: 'tcp' } },
      { id: 'bkdtg_nobody', kind: 'TunnelGroupBackend', labels: { app: 'nobody' } },
    ],
  };
  ing = await startHttpIngress(tableOf(spec), { gateway: s.server.gateway });
});

afterAll(async () => {
  for (const a of agents) a.kill();
  await ing?.close();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  await new Promise((r) => echo?.close(r));
  await s?.close();
});

describe('route modules on the HTTP side', () => {
  it('traffic_policy: a rate limit of 5 per 60 s lets five through and answers the sixth 429 with retry-after', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await ing.get('/limited');
      expect(r.status).toBe(200);
      expect(r.headers['x-policy']).toBe('response-phase');
    }
    const sixth = await ing.get('/limited');
    expect(sixth.status).toBe(429);
    const wait = Number(sixth.headers['retry-after']);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(60);
  });

  it('a module with enabled: false is skipped', async () => {
    for (let i = 0; i < 7; i++) expect((await ing.get('/unlimited')).status).toBe(200);
  });

  it('request_headers adds (winning over the edge\'s own) and removes upstream; response_headers edits the answer', async () => {
    const r = await ing.get('/headers', { headers: { 'x-drop-me': '1', 'x-keep-me': '2' } });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.text);
    expect(seen['x-added']).toBe('by-edge');
    expect(seen['x-forwarded-host']).toBe('rewritten');
    expect(seen['x-drop-me']).toBeUndefined();
    expect(seen['x-keep-me']).toBe('2');
    expect(r.headers['x-frame-options']).toBe('DENY');
    expect(r.headers['x-internal']).toBeUndefined();
  });

  it('circuit_breaker: after volume_threshold failing requests the route answers 503 with retry-after', async () => {
    for (let i = 0; i < 3; i++) expect((await ing.get('/breaker')).headers['edgeform-error-code']).toBe('ERR_SERVICE_742');
    const r = await ing.get('/breaker');
    expect(r.status).toBe(503);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_747');
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    // a reload of the table (any change through the API) keeps the open circuit open
    ing.setTable(tableOf(spec));
    expect((await ing.get('/breaker')).headers['edgeform-error-code']).toBe('ERR_SERVICE_747');
  });

  it.each([
    ['gzip', (b: Buffer) => zlib.gunzipSync(b)],
    ['br', (b: Buffer) => zlib.brotliDecompressSync(b)],
  ] as const)('compression: %s by Accept-Encoding', async (encoding, decode) => {
    const r = await ing.get('/big', { headers: { 'accept-encoding': encoding } });
    expect(r.headers['content-encoding']).toBe(encoding);
    expect(r.headers.vary).toMatch(/accept-encoding/i);
    expect(r.body.length).toBeLessThan(BIG.length / 5);
    expect(decode(r.body).toString()).toBe(BIG);
  });

  it('compression: skipped for small bodies, compressed types and clients that do not ask', async () => {
    expect((await ing.get('/small', { headers: { 'accept-encoding': 'gzip' } })).headers['content-encoding']).toBeUndefined();
    expect((await ing.get('/png', { headers: { 'accept-encoding': 'gzip' } })).headers['content-encoding']).toBeUndefined();
    const plain = await ing.get('/big');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.text).toBe(BIG);
  });

  it('websocket_tcp_converter: the edge answers the handshake and carries frames as TCP bytes to the backend', async () => {
    const socket = net.connect(ing.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    let got = Buffer.alloc(0);
    socket.on('data', (c) => { got = Buffer.concat([got, c]); });
    socket.write('GET /ws HTTP/1.1\r\nHost: app.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
    await until(() => got.includes('\r\n\r\n'), 10_000);
    const head = got.toString('latin1');
    expect(head).toMatch(/^HTTP\/1\.1 101/);
    expect(head).toContain('Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    got = got.subarray(got.indexOf('\r\n\r\n') + 4);
    // a masked client frame; the TCP echo sends the bytes back, which arrive as a binary frame
    const payload = Buffer.from('hello tcp');
    const mask = Buffer.from([9, 8, 7, 6]);
    socket.write(Buffer.concat([Buffer.from([0x82, 0x80 | payload.length]), mask, payload.map((b, i) => b ^ mask[i & 3])]));
    await until(() => got.length >= 2 + payload.length, 10_000);
    expect(got.subarray(0, 2 + payload.length)).toEqual(encodeFrame(OP.binary, payload));
    socket.destroy();
  });
});
