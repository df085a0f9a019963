// Traffic through an agent, end to end: the server opens a stream on the agent's connection
// (the entry point the ingress will use: gateway.openStream / openTcp), the real `edgeform
// agent` process forwards it to an upstream on loopback, and the answer comes back. Bodies
// stream both ways (64 MiB each way here, checked by digest); raw TCP and a WebSocket
// upgrade ride on CONNECT streams.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { ClientHttp2Stream } from 'node:http2';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, tunnels, type AgentProcess } from '../helpers/agent.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let upstream: http.Server;
let echo: net.Server;
let agent: AgentProcess;
let tcpAgent: AgentProcess;
let httpTunnel: string;
let tcpTunnel: string;
const MiB = 1024 * 1024;
const CHUNK = Buffer.alloc(MiB, 'edgeform-');

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000 });
  upstream = http.createServer((req, res) => {
    if (req.url === '/echo') {
      // Streams the body straight back, hashing what went by.
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-seen-host': String(req.headers.host) });
      req.pipe(res);
    } else if (req.url?.startsWith('/big/')) {
      const n = Number(req.url.slice(5));
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let sent = 0;
      const more = () => {
        while (sent < n) {
          sent++;
          if (!res.write(CHUNK)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    } else {
      res.writeHead(404).end('nope');
    }
  });
  upstream.on('upgrade', (req, socket) => {
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Path: ${req.url}\r\n\r\n`);
    socket.pipe(socket);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  echo = net.createServer((c) => c.pipe(c));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const cr = await credentialToken(s);
  const port = (upstream.address() as AddressInfo).port;
  agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=relay', '--forwards-to', `127.0.0.1:${port}`]);
  tcpAgent = startAgent(['--api-url', s.url, '--authtoken', cr.token, 'tcp', `127.0.0.1:${(echo.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  await tcpAgent.waitFor('online: tn_');
  const list = await tunnels(s);
  httpTunnel = list.find((t) => t.labels)!.id;
  tcpTunnel = list.find((t) => t.proto === 'tcp')!.id;
});

afterAll(async () => {
  agent?.kill();
  tcpAgent?.kill();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  await new Promise((r) => echo?.close(r));
  await s?.close();
});

/** Reads a relayed response: status, headers, and the body's digest and length. */
function readResponse(stream: ClientHttp2Stream): Promise<{ status: number; headers: Record<string, unknown>; sha256: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    let bytes = 0;
    let head: Record<string, unknown> = {};
    stream.on('response', (h) => { head = h; });
    stream.on('data', (c: Buffer) => { hash.update(c); bytes += c.length; });
    stream.on('end', () => resolve({ status: Number(head[':status']), headers: head, sha256: hash.digest('hex'), bytes }));
    stream.on('error', reject);
  });
}

describe('HTTP through the agent', () => {
  it('streams a 64 MiB upload to the upstream and its echo back, unchanged', async () => {
    const stream = s.server.gateway.openStream(httpTunnel, { method: 'POST', path: '/echo', headers: { host: 'app.example.com', 'content-type': 'application/octet-stream' } });
    const sent = createHash('sha256');
    const reading = readResponse(stream);
    for (let i = 0; i < 64; i++) {
      sent.update(CHUNK);
      if (!stream.write(CHUNK)) await new Promise((r) => stream.once('drain', r));
    }
    stream.end();
    const got = await reading;
    expect(got.status).toBe(200);
    expect(got.headers['x-seen-host']).toBe('app.example.com');
    expect(got.bytes).toBe(64 * MiB);
    expect(got.sha256).toBe(sent.digest('hex'));
  });

  it('streams a 64 MiB download', async () => {
    const stream = s.server.gateway.openStream(httpTunnel, { method: 'GET', path: '/big/64' });
    stream.end();
    const got = await readResponse(stream);
    const want = createHash('sha256');
    for (let i = 0; i < 64; i++) want.update(CHUNK);
    expect(got).toMatchObject({ status: 200, bytes: 64 * MiB, sha256: want.digest('hex') });
  });

  it('many concurrent requests on one connection each get their own answer', async () => {
    const replies = await Promise.all(Array.from({ length: 50 }, async (_, i) => {
      const stream = s.server.gateway.openStream(httpTunnel, { method: 'POST', path: '/echo' });
      const reading = new Promise<string>((resolve) => {
        let text = '';
        stream.setEncoding('utf8');
        stream.on('data', (c) => { text += c; });
        stream.on('end', () => resolve(text));
      });
      stream.end(`request ${i}`);
      return reading;
    }));
    expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => `request ${i}`));
  });

  it('an upstream status is passed through; an unknown tunnel is 404 from the gateway', async () => {
    const stream = s.server.gateway.openStream(httpTunnel, { method: 'GET', path: '/missing' });
    stream.end();
    expect((await readResponse(stream)).status).toBe(404);
    expect(() => s.server.gateway.openStream('tn_unknown', { method: 'GET', path: '/' })).toThrow(/not found/);
  });
});

describe('raw TCP through the agent', () => {
  it('a CONNECT stream reaches the TCP upstream and carries bytes both ways', async () => {
    const stream = s.server.gateway.openTcp(tcpTunnel);
    const status = await new Promise<number>((resolve) => stream.on('response', (h) => resolve(Number(h[':status']))));
    expect(status).toBe(200);
    const payload = Buffer.alloc(4 * MiB, 'tcp!');
    const back: Buffer[] = [];
    let got = 0;
    const done = new Promise<void>((resolve) => stream.on('data', (c: Buffer) => { back.push(c); got += c.length; if (got >= payload.length) resolve(); }));
    stream.write(payload);
    await done;
    expect(Buffer.concat(back).equals(payload)).toBe(true);
    stream.close();
  });

  it('a WebSocket upgrade rides on a CONNECT stream to an HTTP tunnel', async () => {
    const stream = s.server.gateway.openTcp(httpTunnel);
    await new Promise((resolve) => stream.on('response', resolve));
    let text = '';
    stream.setEncoding('utf8');
    stream.on('data', (c) => { text += c; });
    stream.write('GET /chat HTTP/1.1\r\nHost: app.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
    await new Promise((r) => setTimeout(r, 100));
    stream.write('frame-bytes');
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no echo: ${text}`)), 10_000);
      const check = () => { if (text.includes('frame-bytes')) { clearTimeout(t); resolve(); } };
      stream.on('data', check);
      check();
    });
    expect(text).toMatch(/^HTTP\/1\.1 101 /);
    expect(text).toContain('X-Path: /chat');
    stream.close();
  });
});
