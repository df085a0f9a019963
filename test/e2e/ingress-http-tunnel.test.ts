// Tunnel-group backends through the real `edgeform agent` to local upstreams, with the HTTP
// handler driven from a plain listener: balanced across matching tunnels, forwarding headers,
// streamed bodies, WebSocket pass-through, and the 502/504 pages with their codes.
import { createHash } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { freePort } from '../helpers/ports.js';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';
import { h2Echoed } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

let s: TestServer;
let ing: HttpIngress;
const upstreams: http.Server[] = [];
const agents: AgentProcess[] = [];

function startUpstream(name: string): Promise<number> {
  const server = http.createServer((req, res) => {
    if (req.url === '/echo') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
    } else if (req.url === '/slow') {
      // never answers: the edge gives up with 504
    } else {
      res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': name });
      res.end(JSON.stringify({ name, url: req.url, headers: req.headers }));
    }
  });
  server.on('upgrade', (req, socket) => {
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Upstream: ${name}\r\nX-Path: ${req.url}\r\n\r\n`);
    socket.pipe(socket);
  });
  upstreams.push(server);
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)));
}

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000 });
  const [a, b] = [await startUpstream('a'), await startUpstream('b')];
  const cr = await credentialToken(s);
  const agent = (label: string, port: number) => {
    const p = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', label, '--forwards-to', `127.0.0.1:${port}`]);
    agents.push(p);
    return p.waitFor('online: tn_');
  };
  await Promise.all([agent('app=web', a), agent('app=web', b), agent('app=down', await freePort())]);
  ing = await startHttpIngress(tableOf({
    edges: [{ id: 'edghts_app', hostports: ['app.example.com:443'], routes: [
      route('edghtsrt_web', '/', { backend: { enabled: true, backend_id: 'bkdtg_web' } }),
      route('edghtsrt_down', '/down', { backend: { enabled: true, backend_id: 'bkdtg_down' } }),
      route('edghtsrt_none', '/none', { backend: { enabled: true, backend_id: 'bkdtg_none' } }),
    ] }],
    backends: [
      { id: 'bkdtg_web', kind: 'TunnelGroupBackend', labels: { app: 'web' } },
      { id: 'bkdtg_down', kind: 'TunnelGroupBackend', labels: { app: 'down' } },
      { id: 'bkdtg_none', kind: 'TunnelGroupBackend', labels: { app: 'nobody' } },
    ],
  }), { gateway: s.server.gateway, upstreamTimeoutMs: 1500 });
});

afterAll(async () => {
  for (const a of agents) a.kill();
  await ing?.close();
  for (const u of upstreams) { u.closeAllConnections(); await new Promise((r) => u.close(r)); }
  await s?.close();
});

describe('tunnel-group backends through edgeform agent', () => {
  it('reaches the upstream with X-Forwarded-For, -Proto and -Host set and the Host kept', async () => {
    const r = await ing.get('/api/x?q=1', { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.text);
    expect(seen.url).toBe('/api/x?q=1');
    expect(seen.headers.host).toBe('app.example.com');
    expect(seen.headers['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1');
    expect(seen.headers['x-forwarded-proto']).toBe('https');
    expect(seen.headers['x-forwarded-host']).toBe('app.example.com');
  });

  it('balances across every online tunnel whose labels match', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) seen.add(String((await ing.get('/')).headers['x-upstream']));
    expect([...seen].sort()).toEqual(['a', 'b']);
  });

  it('streams a request body up and the answer back (8 MiB, by digest)', async () => {
    const body = Buffer.alloc(8 * 1024 * 1024, 'edgeform-');
    const r = await ing.get('/echo', { method: 'POST', body });
    expect(r.status).toBe(200);
    expect(createHash('sha256').update(r.body).digest('hex')).toBe(createHash('sha256').update(body).digest('hex'));
  });

  it('streams a request body from an HTTP/2 client through the tunnel and back (1 MiB, by digest)', async () => {
    const h2 = await startHttpIngress(tableOf({
      edges: [{ hostports: ['app.example.com:443'], routes: [route('edghtsrt_web', '/', { backend: { enabled: true, backend_id: 'bkdtg_web' } })] }],
      backends: [{ id: 'bkdtg_web', kind: 'TunnelGroupBackend', labels: { app: 'web' } }],
    }), { gateway: s.server.gateway }, { tls: true });
    const http2 = await import('node:http2');
    const session = http2.connect(h2.url, { rejectUnauthorized: false });
    try {
      expect(await h2Echoed(session, '/echo', 'app.example.com', Buffer.alloc(1024 * 1024, 'h2-body-'))).toEqual({ status: 200, same: true });
    } finally {
      session.close();
      await h2.close();
    }
  });

  it('no online tunnel with the labels: 502 ERR_SERVICE_742; the labels are in the access log, not on the client\'s page', async () => {
    const r = await ing.get('/none');
    expect(r.status).toBe(502);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_742');
    expect(r.text).toContain('ERR_SERVICE_742');
    expect(r.text).not.toContain('app=nobody');
    await until(() => ing.logs.some((l) => l.msg === 'ingress request' && l.code === 'ERR_SERVICE_742' && String(l.detail).includes('app=nobody')), 5000);
  });

  it('an upstream that refuses the connection: 502 ERR_SERVICE_743', async () => {
    const r = await ing.get('/down');
    expect(r.status).toBe(502);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_743');
  });

  it('an upstream that does not answer in time: 504 ERR_SERVICE_744', async () => {
    const r = await ing.get('/slow');
    expect(r.status).toBe(504);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_744');
  });

  it('passes a WebSocket upgrade through to the upstream and carries bytes both ways', async () => {
    const socket = net.connect(ing.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    let got = '';
    socket.on('data', (c) => { got += c.toString('latin1'); });
    socket.write('GET /chat?room=1 HTTP/1.1\r\nHost: app.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
    await until(() => got.includes('\r\n\r\n'), 10_000);
    expect(got).toMatch(/^HTTP\/1\.1 101/);
    expect(got).toContain('X-Path: /chat?room=1');
    got = '';
    socket.write('ping-bytes');
    await until(() => got.includes('ping-bytes'), 10_000);
    expect(got).toBe('ping-bytes');
    socket.destroy();
  });
});
