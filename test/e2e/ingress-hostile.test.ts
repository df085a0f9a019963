// A hostile client of an HTTPS edge, over real sockets to the real listener, with a real
// `edgeform agent` relaying to a local upstream: what it sends must not reach the upstream past
// the routes and modules of the edge, nor take the tunnel offline for other clients.
// The edge a.example.com has `/` open and `/admin` behind an ip_restriction that denies
// loopback; the upstream (one for both routes, as a site behind one agent is) records what
// reaches it.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, sessions, startAgent, type AgentProcess } from '../helpers/agent.js';
import { exchange, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

let s: TestServer;
let port: number;
let ca: string;
let upstream: http.Server;
let agent: AgentProcess;
const reached: { url: string; host?: string; forwardedHost?: string }[] = [];
/** Requests for /slow… the upstream holds (300 ms each) now, and the most at once. */
const slow = { now: 0, most: 0 };

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    reached.push({ url: String(req.url), host: req.headers.host, forwardedHost: String(req.headers['x-forwarded-host']) });
    if (req.url === '/upload') {
      let bytes = 0;
      req.on('data', (c: Buffer) => { bytes += c.length; });
      req.on('end', () => res.end(`received ${bytes}`));
      return;
    }
    req.resume();
    const answer = () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`upstream ${req.url}`);
    };
    if (!req.url?.startsWith('/slow')) return answer();
    slow.now += 1;
    slow.most = Math.max(slow.most, slow.now);
    setTimeout(() => { slow.now -= 1; answer(); }, 300);
  });
  // Upgrades: h2c is taken (as an h2c-enabled server would: 101, then HTTP/2 on the socket);
  // any other is answered as a plain request on a connection kept alive, as an application
  // without WebSocket support does.
  const h2c = http2.createServer((req, res) => {
    reached.push({ url: `h2c ${req.url}` });
    res.end(`h2c ${req.url}`);
  });
  upstream.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (String(req.headers.upgrade).toLowerCase() === 'h2c') {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n');
      return h2c.emit('connection', socket);
    }
    reached.push({ url: String(req.url), host: req.headers.host, forwardedHost: String(req.headers['x-forwarded-host']) });
    socket.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${9 + String(req.url).length}\r\n\r\nupstream ${req.url}`);
    if (head.length) socket.unshift(head);
    upstream.emit('connection', socket);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }], agentHeartbeatMs: 2000 });
  port = ingressPort(s, 443);
  ca = localCa(s);
  const cr = await credentialToken(s);
  agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=hostile', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const group = await s.post('/backends/tunnel_group', { labels: { app: 'hostile' } });
  const policy = await s.post('/ip_policies', {});
  await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: '127.0.0.0/8', action: 'deny' });
  const edge = await s.post('/edges/https', { hostports: ['a.example.com:443'] });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: group.body.id } });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/ws', backend: { backend_id: group.body.id }, websocket_tcp_converter: {} });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/admin', backend: { backend_id: group.body.id }, ip_restriction: { ip_policy_ids: [policy.body.id] } });
}, 60_000);

afterAll(async () => {
  agent?.kill();
  await s?.close().catch(() => {});
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

const h1 = () => tlsConnect(port, { servername: 'a.example.com', ca, ALPNProtocols: ['http/1.1'] });
const h2 = (localAddress?: string) => http2.connect('https://a.example.com', { createConnection: () => tls.connect({ host: '127.0.0.1', port, servername: 'a.example.com', ca, ALPNProtocols: ['h2'], ...(localAddress ? { localAddress } : {}) } as tls.ConnectionOptions) });

function h2Request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers);
    let status = 0;
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (h) => { status = Number(h[':status']); });
    stream.on('data', (c) => { body += c; });
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
  });
}

describe('what reaches the upstream', () => {
  it('the route check holds: /admin is refused at the edge', async () => {
    const r = await exchange(await h1(), 'GET /admin/secret HTTP/1.1\r\nHost: a.example.com\r\nConnection: close\r\n\r\n', { quietMs: 2000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 403 /);
    expect(reached.map((x) => x.url)).not.toContain('/admin/secret');
  });

  it('an upgrade the upstream does not take ends the connection: no request rides it past the routes (smuggling)', async () => {
    reached.length = 0;
    const socket = await h1();
    // Pipelined behind the upgrade, and sent again once the refusal is in.
    const first = exchange(socket, 'GET /other HTTP/1.1\r\nHost: a.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nGET /admin/one HTTP/1.1\r\nHost: a.example.com\r\n\r\n', { quietMs: 1000 });
    await until(() => reached.length > 0, 10_000);
    if (!socket.destroyed) socket.write('GET /admin/two HTTP/1.1\r\nHost: a.example.com\r\n\r\n');
    const r = await first;
    expect(r.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(r.text).toContain('upstream /other');
    expect(r.text).not.toContain('/admin');
    expect(r.closed).toBe(true);
    expect(reached.map((x) => x.url)).toEqual(['/other']);
  });

  it('Upgrade: h2c is refused at the edge (400 ERR_SERVICE_753): an upstream that speaks h2c would take any path on it (smuggling)', async () => {
    reached.length = 0;
    const socket = await h1();
    const r = await exchange(socket, 'GET / HTTP/1.1\r\nHost: a.example.com\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n', { quietMs: 1000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(r.text).toContain('ERR_SERVICE_753');
    expect(r.closed).toBe(true);
    expect(reached).toEqual([]);
  });

  it('over HTTP/2, a host header beside :authority does not name the site to the upstream', async () => {
    reached.length = 0;
    const session = h2();
    session.on('error', () => {});
    const r = await h2Request(session, { ':path': '/page', ':authority': 'a.example.com', host: 'b.example.com' });
    session.close();
    expect(r.status).toBe(200);
    expect(reached).toEqual([{ url: '/page', host: 'a.example.com', forwardedHost: 'a.example.com' }]);
  });
});

describe('the tunnel under a client that cancels', () => {
  it('requests reset by their clients by the thousand do not close the agent\'s session (HTTP/2 rapid reset)', async () => {
    const [before] = await sessions(s);
    // Each connection resets 100 requests (as many as it may have in flight) once the edge has
    // relayed them; 1,500 in all.
    for (let c = 0; c < 15; c++) {
      const session = h2();
      session.on('error', () => {});
      await new Promise((r) => session.once('connect', r));
      const streams = Array.from({ length: 100 }, () => {
        const stream = session.request({ ':path': '/slow' });
        stream.on('error', () => {});
        return stream;
      });
      await new Promise((r) => setTimeout(r, 100));
      for (const stream of streams) stream.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise((r) => setTimeout(r, 100));
      session.destroy();
    }
    await new Promise((r) => setTimeout(r, 500));
    expect((await sessions(s)).map((x) => x.id)).toEqual([before.id]);
    // Another client address is served at once; the one that cancelled is refused (503
    // ERR_SERVICE_752) while its own cancels wait their turn, then served again.
    const other = h2('127.0.0.2');
    other.on('error', () => {});
    const r = await h2Request(other, { ':path': '/after' });
    other.close();
    expect(r).toEqual({ status: 200, body: 'upstream /after' });
    await until(async () => {
      const session = h2();
      session.on('error', () => {});
      const again = await h2Request(session, { ':path': '/after' });
      session.close();
      if (again.status !== 200) expect(again.status).toBe(503);
      return again.status === 200;
    }, 60_000, () => 'the client that cancelled was not served again once its cancels had gone');
  }, 90_000);
});

describe('websocket_tcp_converter', () => {
  it('a client that pings without reading the pongs is read no faster than it reads (memory stays bounded)', async () => {
    const socket = await h1();
    socket.write(`GET /ws HTTP/1.1\r\nHost: a.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    const head = await new Promise<string>((r) => socket.once('data', (d) => r(String(d))));
    expect(head).toMatch(/^HTTP\/1\.1 101 /);
    socket.pause();
    // Masked (with a zero mask) pings of 125 bytes, 1,000 to a write; never a byte read back.
    const ping = Buffer.concat([Buffer.from([0x89, 0x80 | 125, 0, 0, 0, 0]), Buffer.alloc(125, 1)]);
    const batch = Buffer.concat(Array.from({ length: 1000 }, () => ping));
    const limit = 64 * 1024 * 1024;
    let sent = 0;
    while (sent < limit) {
      sent += batch.length;
      if (socket.write(batch)) continue;
      const drained = await Promise.race([new Promise((r) => socket.once('drain', () => r(true))), new Promise((r) => setTimeout(() => r(false), 2000))]);
      if (!drained) break;
    }
    socket.destroy();
    // The edge stopped reading once its pongs backed up: the client's writes stalled long
    // before 64 MiB (socket buffers hold a few MiB); an edge reading on would queue every pong.
    expect(sent).toBeLessThan(limit / 2);
  });
});

describe('requests in flight on one connection', () => {
  it('HTTP/2: at most 100 streams at once (SETTINGS_MAX_CONCURRENT_STREAMS); the rest wait their turn', async () => {
    slow.most = 0;
    const session = h2();
    session.on('error', () => {});
    const answers = await Promise.all(Array.from({ length: 250 }, (_, i) => h2Request(session, { ':path': `/slow/${i}` })));
    session.close();
    expect(answers.filter((a) => a.status === 200)).toHaveLength(250);
    expect(slow.most).toBeGreaterThan(0);
    expect(slow.most).toBeLessThanOrEqual(100);
  });

  it('HTTP/1.1: a client pipelining more than 100 requests ahead of their answers is closed', async () => {
    slow.most = 0;
    const pipelined = Array.from({ length: 250 }, (_, i) => `GET /slow/p${i} HTTP/1.1\r\nHost: a.example.com\r\n\r\n`).join('');
    const r = await exchange(await h1(), pipelined, { quietMs: 3000 });
    expect(r.closed).toBe(true);
    expect(slow.most).toBeLessThanOrEqual(100);
  });
});

describe('a slow client', () => {
  it('an HTTP/1.1 upload that keeps arriving is not cut at 60 s (only a stalled one is, by the idle timeout)', async () => {
    const socket = await h1();
    let answer = '';
    socket.on('data', (c) => { answer += c; });
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    const chunk = Buffer.alloc(1024, 'u');
    const chunks = 125;
    socket.write(`POST /upload HTTP/1.1\r\nHost: a.example.com\r\nContent-Length: ${chunk.length * chunks}\r\nConnection: close\r\n\r\n`);
    // 1 KiB every half second: 62 s in all, past Node's default request timeout of the edge (60 s).
    for (let i = 0; i < chunks && !socket.destroyed; i++) {
      socket.write(chunk);
      await new Promise((r) => setTimeout(r, 500));
    }
    await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))]);
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain(`received ${chunk.length * chunks}`);
  }, 90_000);
});
