// What a client can make an ingress listener hold is bounded, and nothing it sends crashes
// the server or shows another edge's content: oversized headers (431), malformed HTTP (400),
// headers sent too slowly, a ClientHello that never comes, a flood of connections past
// maxConnections; then SIGTERM's drain: the listener stops accepting, idle connections close
// and close() resolves.
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { edgeAnswering, edgeRequest, exchange, h2Get, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let port: number;
let ca: string;

beforeAll(async () => {
  s = await startTestServer({
    ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }],
    ingressMaxConnections: 4,
    ingressLimits: { handshakeTimeoutMs: 500, headersTimeoutMs: 500 },
    drain: { idleMs: 100, deadlineMs: 3000 },
  });
  port = ingressPort(s, 443);
  ca = localCa(s);
  await edgeAnswering(s, 'app.example.com', 'app content');
});

afterAll(async () => {
  await s?.close().catch(() => {});
});

const tlsTo = () => tlsConnect(port, { servername: 'app.example.com', ca });

describe('bad input at the connection level', () => {
  it('closes connections past maxConnections at once and serves again when they go', async () => {
    const held = await Promise.all(Array.from({ length: 4 }, () => tlsTo()));
    const extra = await exchange(net.connect(port, '127.0.0.1'), undefined, { quietMs: 2000 });
    expect(extra.closed).toBe(true);
    held.forEach((h) => h.destroy());
    await new Promise((r) => setTimeout(r, 100));
    expect((await edgeRequest({ port, host: 'app.example.com', ca })).status).toBe(200);
  });

  it('answers headers over 16 KiB with 431 and malformed HTTP with 400, and keeps serving', async () => {
    const big = await exchange(await tlsTo(), `GET / HTTP/1.1\r\nHost: app.example.com\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, { quietMs: 2000 });
    expect(big.text).toMatch(/^HTTP\/1\.1 431 /);
    expect(big.text).toContain('ERR_SERVICE_703');
    const garbage = await exchange(await tlsTo(), 'NOT HTTP AT ALL\r\n\r\n', { quietMs: 2000 });
    expect(garbage.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(garbage.text).not.toContain('app content');
    expect((await edgeRequest({ port, host: 'app.example.com', ca })).text).toBe('app content');
  });

  it('answers a request line of 100 KB, or headers of 100 KB, 431 ERR_SERVICE_703 before closing (the answer is not lost to a reset)', async () => {
    for (const [what, head] of [
      ['request line', `GET /${'a'.repeat(100_000)} HTTP/1.1\r\nHost: app.example.com\r\n\r\n`],
      ['header', `GET / HTTP/1.1\r\nHost: app.example.com\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`],
      ['many headers', `GET / HTTP/1.1\r\nHost: app.example.com\r\n${Array.from({ length: 2000 }, (_, i) => `X-H${i}: ${'v'.repeat(40)}\r\n`).join('')}\r\n`],
    ]) {
      const r = await exchange(await tlsTo(), head, { quietMs: 4000 });
      expect(r.text, what).toMatch(/^HTTP\/1\.1 431 /);
      expect(r.text, what).toMatch(/\r\nedgeform-error-code: ERR_SERVICE_703\r\n/);
      expect(r.text, what).toContain('larger than 16 KiB');
      expect(r.text, what).not.toContain('app content');
      expect(r.closed, what).toBe(true);
    }
    expect((await edgeRequest({ port, host: 'app.example.com', ca })).text).toBe('app content');
  });

  it('answers a request target over 8 KiB 414 ERR_SERVICE_845 and closes the HTTP/1.1 connection', async () => {
    const r = await exchange(await tlsTo(), `GET /${'a'.repeat(10_000)}?q=1 HTTP/1.1\r\nHost: app.example.com\r\n\r\nGET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n`, { quietMs: 4000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 414 /);
    expect(r.text).toMatch(/\r\nedgeform-error-code: ERR_SERVICE_845\r\n/);
    expect(r.text).not.toContain('app content');
    expect(r.closed).toBe(true);
    const under = await edgeRequest({ port, host: 'app.example.com', ca, path: `/${'a'.repeat(8000)}` });
    expect(under.text).toBe('app content');
  });

  it('over HTTP/2 answers a target over 8 KiB 414 and headers over 16 KiB 431 on their stream, and the session serves on', async () => {
    const long = await h2Get(port, 'app.example.com', `/${'a'.repeat(10_000)}`, ca);
    expect(long).toMatchObject({ status: 414, alpn: 'h2' });
    expect(long.headers['edgeform-error-code']).toBe('ERR_SERVICE_845');
    const big = await h2Get(port, 'app.example.com', '/', ca, { 'x-big': 'a'.repeat(20_000) });
    expect(big.status).toBe(431);
    expect(big.headers['edgeform-error-code']).toBe('ERR_SERVICE_703');
    expect(big.body).not.toContain('app content');
    expect(await h2Get(port, 'app.example.com', '/', ca, { 'x-fine': 'a'.repeat(4_000) })).toMatchObject({ status: 200, body: 'app content' });
  });

  it('answers an HTTP/1.1 request with no Host, or with two, 400 and closes (RFC 9112 3.2), never the edge content', async () => {
    for (const head of ['GET / HTTP/1.1\r\n', 'GET / HTTP/1.1\r\nHost: app.example.com\r\nHost: other.example.com\r\n', 'GET / HTTP/1.1\r\nHost: app.example.com\r\nhost: app.example.com\r\n']) {
      const r = await exchange(await tlsTo(), `${head}\r\n`, { quietMs: 2000 });
      expect(r.text, head).toMatch(/^HTTP\/1\.1 400 /);
      expect(r.text, head).toContain('ERR_SERVICE_702');
      expect(r.text, head).not.toContain('app content');
      expect(r.closed, head).toBe(true);
    }
    expect((await edgeRequest({ port, host: 'app.example.com', ca })).text).toBe('app content');
  });

  it('closes a connection whose headers do not arrive in time, and one that never says hello', async () => {
    const slow = await tlsTo();
    slow.write('GET / HTTP/1.1\r\nHost: app.example.com\r\n');
    const r = await exchange(slow, 'X-Slow: 1\r\n', { quietMs: 5000 });
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 408 /);
    const silent = await exchange(net.connect(port, '127.0.0.1'), undefined, { quietMs: 5000 });
    expect(silent).toMatchObject({ text: '', closed: true });
  });

});

describe('shutdown', () => {
  it('stops accepting, closes idle kept-alive connections, and resolves', async () => {
    const idle: tls.TLSSocket = await tlsTo();
    const first = exchange(idle, 'GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n', { quietMs: 5000 });
    await new Promise((r) => setTimeout(r, 200));
    await s.server.close();
    const r = await first;
    expect(r.text).toContain('app content');
    expect(r.closed).toBe(true);
    const refused = await exchange(net.connect(port, '127.0.0.1'), undefined, { quietMs: 1000 });
    expect(refused.error).toBe('ECONNREFUSED');
  });
});
