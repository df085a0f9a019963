// Slots and timeouts of the ingress (issue 28 item 8), over real sockets: one client address
// holds at most --ingress-connections-per-client connections per listener (3 here; another
// address is not affected); a request body that stops coming is cut after
// --ingress-body-idle-timeout (1 s here: 408 ERR_SERVICE_861 on HTTP/1.1, RST_STREAM on HTTP/2);
// an upstream that never answers an upgrade gets 504 ERR_SERVICE_744, and one that stalls after
// its head is cut, after --ingress-upstream-idle-timeout (1 s here), on both relay paths.
import http2 from 'node:http2';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../server/config.js';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest, exchange, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

/** `/stall` answers its head and a first chunk, then nothing; an upgrade is never answered; anything else `ok` once its whole body (Content-Length) is in. */
function stallingUpstream() {
  return net.createServer((socket) => {
    socket.on('error', () => {});
    let buf = '';
    socket.on('data', (c) => {
      buf += c.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/^content-length:\s*(\d+)/im.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const head = buf;
      buf = '';
      if (/^upgrade:/im.test(head)) return;
      if (head.split(' ')[1]?.startsWith('/stall')) return void socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n');
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    });
  });
}

interface Setup { s: TestServer; agent: AgentProcess; upstream: net.Server; port: number; ca: string }

async function setUp(pool: number): Promise<Setup> {
  const upstream = stallingUpstream();
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const s = await startTestServer({
    ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }],
    agentRelayPool: pool,
    ingressConnectionsPerClient: 3,
    ingressBodyIdleTimeoutMs: 1000,
    ingressUpstreamIdleTimeoutMs: 1000,
  });
  const cr = await credentialToken(s);
  const agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=slots', '--forwards-to', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const group = await s.post('/backends/tunnel_group', { labels: { app: 'slots' } });
  const edge = await s.post('/edges/https', { hostports: ['slots.example.com:443'] });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: group.body.id } });
  return { s, agent, upstream, port: ingressPort(s, 443), ca: localCa(s) };
}

async function tearDown(x?: Setup) {
  x?.agent.kill();
  await x?.s.close().catch(() => {});
  x?.upstream.close();
}

const open = (x: Setup, localAddress?: string) => tlsConnect(x.port, { servername: 'slots.example.com', ca: x.ca, localAddress, ALPNProtocols: ['http/1.1'] } as tls.ConnectionOptions);

describe('connections per client address and stalled request bodies', { timeout: 60_000 }, () => {
  let x: Setup;
  beforeAll(async () => { x = await setUp(0); }, 60_000);
  afterAll(() => tearDown(x));

  it('a fourth connection from one address is closed at once; another address still connects; a slot comes back when a connection closes', async () => {
    const held = [await open(x), await open(x), await open(x)];
    await expect(open(x)).rejects.toThrow();
    const other = await open(x, '127.0.0.2');
    const r = await exchange(other, 'GET /other HTTP/1.1\r\nhost: slots.example.com\r\nconnection: close\r\n\r\n');
    expect(r.text).toMatch(/^HTTP\/1\.1 200/);
    held.pop()!.destroy();
    await until(async () => {
      const again = await open(x).then((s) => s, () => undefined);
      again?.destroy();
      return again !== undefined;
    }, 5000, () => 'no slot came back after a connection closed');
    for (const s of held) s.destroy();
  });

  // From addresses of their own: the connections the first test held may still be closing.
  it('HTTP/1.1: a body that stops coming is answered 408 ERR_SERVICE_861 and the connection closed', async () => {
    const socket = await open(x, '127.0.0.3');
    const started = Date.now();
    const r = await exchange(socket, 'POST /upload HTTP/1.1\r\nhost: slots.example.com\r\ncontent-length: 100\r\n\r\n0123456789');
    socket.destroy();
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 408/);
    expect(r.text).toContain('ERR_SERVICE_861');
    expect(Date.now() - started).toBeLessThan(8000);
  });

  it('HTTP/1.1: a body that keeps coming, if slowly, is not cut', async () => {
    const socket = await open(x, '127.0.0.4');
    socket.write('POST /slow HTTP/1.1\r\nhost: slots.example.com\r\ncontent-length: 6\r\nconnection: close\r\n\r\n');
    for (let i = 0; i < 5; i++) {
      socket.write('x');
      await new Promise((r) => setTimeout(r, 400));
    }
    const r = await exchange(socket, 'x');
    socket.destroy();
    expect(r.text).toMatch(/^HTTP\/1\.1 200/);
  });

  it('HTTP/2: a body that stops coming ends its stream with RST_STREAM; the session serves on', async () => {
    const client = http2.connect('https://slots.example.com', { createConnection: () => tls.connect({ host: '127.0.0.1', port: x.port, servername: 'slots.example.com', ca: x.ca, ALPNProtocols: ['h2'] }) });
    client.on('error', () => {});
    try {
      const stream = client.request({ ':method': 'POST', ':path': '/upload' });
      stream.write('0123456789');
      const how = await new Promise<string>((r) => {
        stream.once('end', () => r('end'));
        stream.once('error', (e) => r(e.message));
        stream.once('close', () => r(`close ${stream.rstCode}`));
      });
      expect(how).not.toBe('end');
      expect(stream.rstCode).not.toBe(http2.constants.NGHTTP2_NO_ERROR);
      const next = client.request({ ':path': '/after' });
      let body = '';
      next.on('data', (c) => { body += c; });
      await new Promise((r) => next.once('end', r));
      expect(body).toBe('ok');
    } finally {
      client.destroy();
    }
  });
});

describe.each([
  ['as its own stream', 0],
  ['over a pooled upstream connection', 2],
])('an upstream that stalls, relayed %s', { timeout: 60_000 }, (_name, pool) => {
  let x: Setup;
  beforeAll(async () => { x = await setUp(pool); }, 60_000);
  afterAll(() => tearDown(x));

  it('after its head: the answer is cut after the upstream idle timeout (no last chunk), never held forever', async () => {
    if (pool > 0) {
      const before = x.s.server.gateway.relayed.pooled;
      await until(async () => (await edgeRequest({ port: x.port, host: 'slots.example.com', ca: x.ca, path: '/warm' })).text === 'ok' && x.s.server.gateway.relayed.pooled > before, 10_000);
      await new Promise((r) => setTimeout(r, 100));
    }
    const socket = await open(x);
    const started = Date.now();
    const r = await exchange(socket, 'GET /stall HTTP/1.1\r\nhost: slots.example.com\r\n\r\n');
    socket.destroy();
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 200/);
    expect(r.text).toContain('hello');
    expect(r.text).not.toContain('0\r\n\r\n');
    expect(Date.now() - started).toBeLessThan(9000);
  });

  it('a WebSocket upgrade it never answers: 504 ERR_SERVICE_744 after the upstream idle timeout', async () => {
    const socket = await open(x);
    const r = await exchange(socket, `GET /ws HTTP/1.1\r\nhost: slots.example.com\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: ${Buffer.alloc(16, 2).toString('base64')}\r\nsec-websocket-version: 13\r\n\r\n`);
    socket.destroy();
    expect(r.text).toMatch(/^HTTP\/1\.1 504/);
    expect(r.text).toContain('ERR_SERVICE_744');
  });
});

describe('the settings', () => {
  it('each is a flag and an environment variable, with its default, 0 where it turns a bound off, and a refusal of a bad value', () => {
    const d = resolveConfig({}, {});
    expect([d.ingressConnectionsPerClient, d.ingressBodyIdleTimeoutMs, d.ingressUpstreamIdleTimeoutMs, d.ingressBufferMib, d.ingressUnreadMib]).toEqual([256, 10_000, 60_000, 256, 256]);
    const flags = resolveConfig({ ingressConnectionsPerClient: '5', ingressBodyIdleTimeout: '3', ingressUpstreamIdleTimeout: '0', ingressBufferMib: '64', ingressUnreadMib: '0' }, {});
    expect([flags.ingressConnectionsPerClient, flags.ingressBodyIdleTimeoutMs, flags.ingressUpstreamIdleTimeoutMs, flags.ingressBufferMib, flags.ingressUnreadMib]).toEqual([5, 3000, 0, 64, 0]);
    const env = resolveConfig({}, { EDGEFORM_INGRESS_CONNECTIONS_PER_CLIENT: '0', EDGEFORM_INGRESS_BODY_IDLE_TIMEOUT: '0', EDGEFORM_INGRESS_UPSTREAM_IDLE_TIMEOUT: '120', EDGEFORM_INGRESS_BUFFER_MIB: '0', EDGEFORM_INGRESS_UNREAD_MIB: '32' });
    expect([env.ingressConnectionsPerClient, env.ingressBodyIdleTimeoutMs, env.ingressUpstreamIdleTimeoutMs, env.ingressBufferMib, env.ingressUnreadMib]).toEqual([0, 0, 120_000, 0, 32]);
    expect(() => resolveConfig({ ingressConnectionsPerClient: '-1' }, {})).toThrow(/--ingress-connections-per-client/);
    expect(() => resolveConfig({}, { EDGEFORM_INGRESS_UPSTREAM_IDLE_TIMEOUT: 'soon' })).toThrow(/--ingress-upstream-idle-timeout/);
  });
});
