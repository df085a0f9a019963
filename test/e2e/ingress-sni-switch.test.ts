// Issue 28 item 1: one server name decides a TLS connection's edge, certificate, minimum
// version and client-certificate check. A TLS 1.3 client may send a second ClientHello after
// a HelloRetryRequest; one whose second ClientHello names another server than its first
// (here: any name first, then an edge with mutual_tls) must not get that edge without a
// client certificate: its handshake fails, on HTTPS edges (HTTP/1.1 and HTTP/2) and on TLS
// edges that terminate at the edge. The same client naming one server twice is served, so
// what refuses the switch is the switch.
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeAnswering, edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { Pki } from '../helpers/pki.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { twoHellos } from '../helpers/tls13-two-hellos.js';

let s: TestServer;
let caId = '';
let echo: net.Server;
let agent: AgentProcess | undefined;
const pki = new Pki();

/** GET / over HTTP/1.1 on the connection: status and body, or the error. */
function h1Get(stream: Duplex, host: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host, path: '/', headers: { host }, createConnection: () => stream as never }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', reject);
    req.end();
  });
}

/** GET / over HTTP/2 on the connection. */
function h2GetOn(stream: Duplex, host: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const client = http2.connect(`https://${host}`, { createConnection: () => stream as never });
    client.on('error', reject);
    const timer = setTimeout(() => { client.destroy(); reject(new Error('no answer within 10 s')); }, 10_000);
    const req = client.request({ ':path': '/' });
    let status = 0;
    let text = '';
    req.setEncoding('utf8');
    req.on('response', (h) => { status = Number(h[':status']); });
    req.on('data', (c) => { text += c; });
    req.on('end', () => { clearTimeout(timer); client.close(); if (status) resolve({ status, text }); else reject(new Error('no answer')); });
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

/** Writes `text` and reads what comes back until the connection ends, `text`'s length arrived, or 10 s pass. */
function echoed(stream: Duplex, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const done = () => { clearTimeout(timer); stream.destroy(); resolve(got); };
    const timer = setTimeout(done, 10_000);
    stream.on('data', (c: Buffer) => { got += c; if (got.length >= text.length) done(); });
    stream.on('end', done);
    stream.on('close', done);
    stream.on('error', () => {});
    stream.write(text);
  });
}

beforeAll(async () => {
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }, { publicPort: 9443, host: '127.0.0.1', port: 0 }] });
  const root = pki.issue('p256', { subject: [['CN', 'client root']], ca: true, keyUsage: ['keyCertSign'] });
  caId = (await s.post('/certificate_authorities', { ca_pem: root.cert })).body.id;
  await edgeAnswering(s, 'open.example.com', 'open content');
  const { edgeId } = await edgeAnswering(s, 'mtls.example.com', 'mtls content');
  expect((await s.patch(`/edges/https/${edgeId}`, { mutual_tls: { certificate_authority_ids: [caId] } })).status).toBe(200);
  echo = net.createServer((c) => c.pipe(c));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const cred = await credentialToken(s);
  agent = startAgent(['--api-url', s.url, '--authtoken', cred.token, '--label', 'app=echo', '--forwards-to', `127.0.0.1:${(echo.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const tg = (await s.post('/backends/tunnel_group', { labels: { app: 'echo' } })).body.id;
  expect((await s.post('/edges/tls', { hostports: ['tls-open.example.com:9443'], backend: { backend_id: tg } })).status).toBe(201);
  expect((await s.post('/edges/tls', { hostports: ['tls-mtls.example.com:9443'], backend: { backend_id: tg }, mutual_tls: { certificate_authority_ids: [caId] } })).status).toBe(201);
});

afterAll(async () => {
  agent?.kill();
  await new Promise((r) => echo?.close(r));
  await s?.close();
  pki.close();
});

describe('HTTPS edges: a second ClientHello naming another server', () => {
  // After a HelloRetryRequest the server picks no ALPN protocol (Node sets its ALPN callback
  // on the server's context, and OpenSSL reads it from the context the SNI callback chose), so
  // an h2 client falls back to HTTP/1.1: each request below speaks what the server chose.
  const get = (c: { stream: Duplex; alpn?: string }, host: string) => (c.alpn === 'h2' ? h2GetOn : h1Get)(c.stream, host);

  it('the raw client is served when it names one server twice, and is asked for a certificate by the mutual_tls edge', async () => {
    const port = ingressPort(s, 443);
    for (const alpn of [[], ['http/1.1'], ['h2', 'http/1.1']]) {
      const c = await twoHellos(port, 'open.example.com', 'open.example.com', alpn);
      expect(await get(c, 'open.example.com')).toEqual({ status: 200, text: 'open content' });
    }
    const m = await twoHellos(port, 'mtls.example.com', 'mtls.example.com', ['http/1.1']);
    expect(m.certificateRequested).toBe(true);
    await expect(h1Get(m.stream, 'mtls.example.com')).rejects.toThrow();
  });

  for (const alpn of [['http/1.1'], ['h2', 'http/1.1']]) {
    for (const first of ['open.example.com', 'unknown.example.com']) {
      it(`ALPN ${alpn.join(',')}: first ${first}, then the mutual_tls edge: refused, no content crosses`, async () => {
        const port = ingressPort(s, 443);
        // The client's side of a TLS 1.3 handshake is done once it sends its Finished; the
        // server then closes the connection unread (or refuses it before): no answer either way.
        await expect(twoHellos(port, first, 'mtls.example.com', alpn).then((c) => get(c, 'mtls.example.com'))).rejects.toThrow();
      });
    }
  }

  it('first the mutual_tls edge, then the open one: refused too (the name may not change at all)', async () => {
    await expect(twoHellos(ingressPort(s, 443), 'mtls.example.com', 'open.example.com', ['http/1.1']).then((c) => h1Get(c.stream, 'open.example.com'))).rejects.toThrow();
  });
});

describe('an edge whose mutual_tls changes while a connection is open', () => {
  it('the connection handshaken without it is refused 421 ERR_SERVICE_701 and closed; a new one without a certificate is refused', async () => {
    const { edgeId } = await edgeAnswering(s, 'later.example.com', 'later content');
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const port = ingressPort(s, 443);
      const first = await edgeRequest({ port, host: 'later.example.com', ca: localCa(s), agent });
      expect(first.text).toBe('later content');
      expect((await s.patch(`/edges/https/${edgeId}`, { mutual_tls: { certificate_authority_ids: [caId] } })).status).toBe(200);
      const second = await edgeRequest({ port, host: 'later.example.com', ca: localCa(s), agent });
      expect(second.status).toBe(421);
      expect(second.headers['edgeform-error-code']).toBe('ERR_SERVICE_701');
      expect(second.text).not.toContain('later content');
      await expect(edgeRequest({ port, host: 'later.example.com', ca: localCa(s) })).rejects.toThrow();
    } finally {
      agent.destroy();
    }
  });
});

describe('TLS edges terminated at the edge: a second ClientHello naming another server', () => {
  it('the raw client naming one server twice is carried to the upstream, and asked for a certificate by the mutual_tls edge', async () => {
    const o = await twoHellos(ingressPort(s, 9443), 'tls-open.example.com', 'tls-open.example.com');
    expect(o.certificateRequested).toBe(false);
    expect(await echoed(o.stream, 'through the open edge')).toBe('through the open edge');
    const c = await twoHellos(ingressPort(s, 9443), 'tls-mtls.example.com', 'tls-mtls.example.com');
    expect(c.certificateRequested).toBe(true);
    expect(await echoed(c.stream, 'let me in')).toBe('');
  });

  it('first the open TLS edge, then the mutual_tls one: nothing reaches the upstream or comes back', async () => {
    const c = await twoHellos(ingressPort(s, 9443), 'tls-open.example.com', 'tls-mtls.example.com').catch(() => undefined);
    if (c) expect(await echoed(c.stream, 'let me in')).toBe('');
  });
});
