// An upstream that dies in the middle of its answer: the client must see the answer cut short,
// never a complete one. HTTP/1.1: the connection closes without the last chunk (chunked) or
// short of Content-Length; HTTP/2: the stream ends with RST_STREAM, not END_STREAM. On both
// relay paths (a pooled upstream connection, and a request as its own stream through
// `edgeform agent`, which used to end the stream cleanly: Node's close(code) sends END_STREAM
// first), over real sockets, with a raw TCP upstream.
import http2 from 'node:http2';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { exchange, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

/** Answers by path: `/chunked` and `/length` send part of an answer and then close the connection; anything else a whole small answer. */
function cuttingUpstream() {
  return net.createServer((socket) => {
    socket.on('error', () => {});
    let buf = '';
    socket.on('data', (c) => {
      buf += c.toString('latin1');
      if (!buf.includes('\r\n\r\n')) return;
      const path = buf.split(' ')[1] ?? '';
      buf = '';
      if (path.startsWith('/chunked')) socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n');
      else if (path.startsWith('/length')) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789');
      else return void socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      // After the part has surely gone through the agent and the edge to the client.
      setTimeout(() => socket.destroy(), 100);
    });
  });
}

interface Setup { s: TestServer; agent: AgentProcess; upstream: net.Server; port: number; ca: string }

async function setUp(pool: number): Promise<Setup> {
  const upstream = cuttingUpstream();
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }], agentRelayPool: pool });
  const cr = await credentialToken(s);
  const agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=cut', '--forwards-to', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const group = await s.post('/backends/tunnel_group', { labels: { app: 'cut' } });
  const edge = await s.post('/edges/https', { hostports: ['cut.example.com:443'] });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: group.body.id } });
  return { s, agent, upstream, port: ingressPort(s, 443), ca: localCa(s) };
}

async function tearDown(x?: Setup) {
  x?.agent.kill();
  await x?.s.close().catch(() => {});
  x?.upstream.close();
}

/** One HTTP/1.1 request on a fresh connection, read until the server closes it (asked to, after a whole answer). */
async function h1(x: Setup, path: string) {
  const socket = await tlsConnect(x.port, { servername: 'cut.example.com', ca: x.ca });
  const r = await exchange(socket, `GET ${path} HTTP/1.1\r\nhost: cut.example.com\r\nconnection: close\r\n\r\n`);
  socket.destroy();
  const text = r.data.toString('latin1');
  const at = text.indexOf('\r\n\r\n');
  return { closed: r.closed, head: text.slice(0, at).toLowerCase(), body: text.slice(at + 4) };
}

/** One HTTP/2 request: how its stream ended ('end' for END_STREAM, else the error) and its RST_STREAM code. */
async function h2(x: Setup, path: string) {
  const client = http2.connect('https://cut.example.com', { createConnection: () => tls.connect({ host: '127.0.0.1', port: x.port, servername: 'cut.example.com', ca: x.ca, ALPNProtocols: ['h2'] }) });
  client.on('error', () => {});
  try {
    const stream = client.request({ ':path': path });
    let status = 0;
    let body = '';
    stream.on('response', (h) => { status = Number(h[':status']); });
    stream.on('data', (c: Buffer) => { body += c.toString(); });
    const how = await new Promise<string>((r) => {
      stream.once('end', () => r('end'));
      stream.once('error', (e) => r(e.message));
      stream.once('close', () => r('close'));
    });
    await new Promise((r) => (stream.closed ? r(undefined) : stream.once('close', r)));
    return { status, body, how, rstCode: stream.rstCode };
  } finally {
    client.destroy();
  }
}

describe.each([
  ['as its own stream', 0],
  ['over a pooled upstream connection', 2],
])('a body cut short, relayed %s', { timeout: 60_000 }, (_name, pool) => {
  let x: Setup;
  beforeAll(async () => { x = await setUp(pool); }, 60_000);
  afterAll(() => tearDown(x));

  /** Makes the next request take the path this block is about (a pooled connection is idle, or there is no pool). */
  async function onPath() {
    if (pool === 0) return;
    const before = x.s.server.gateway.relayed.pooled;
    await until(async () => {
      const r = await h1(x, '/warm');
      expect(r.body).toBe('ok');
      return x.s.server.gateway.relayed.pooled > before;
    }, 10_000, () => 'no request went over a pooled connection');
    // The pool holds idle connections again (the warm-up's came back).
    await new Promise((r) => setTimeout(r, 100));
  }

  /** The counter of the path this block is about, which the cut request must have moved. */
  const taken = () => (pool === 0 ? x.s.server.gateway.relayed.stream : x.s.server.gateway.relayed.pooled);

  it('HTTP/1.1, chunked: the connection closes without the last chunk', async () => {
    await onPath();
    const before = taken();
    const r = await h1(x, '/chunked');
    expect(taken()).toBe(before + 1);
    expect(r.head).toContain('200');
    expect(r.head).toContain('transfer-encoding: chunked');
    expect(r.closed).toBe(true);
    expect(r.body).toContain('hello');
    expect(r.body).not.toContain('0\r\n\r\n');
  });

  it('HTTP/1.1, Content-Length: the connection closes short of it', async () => {
    await onPath();
    const r = await h1(x, '/length');
    expect(r.closed).toBe(true);
    expect(r.head).toContain('content-length: 100');
    expect(r.body.length).toBeLessThan(100);
  });

  it('HTTP/2, chunked upstream and Content-Length: RST_STREAM, never END_STREAM', async () => {
    for (const path of ['/chunked', '/length']) {
      await onPath();
      const before = taken();
      const r = await h2(x, path);
      expect(taken()).toBe(before + 1);
      expect(r.how).not.toBe('end');
      expect(r.rstCode).not.toBe(http2.constants.NGHTTP2_NO_ERROR);
    }
  });
});
