// Pooled upstream connections (server/gateway/relay-pool.ts) against a hostile or broken
// upstream, with real processes and sockets: an in-process server with one pooled connection
// per tunnel, `edgeform agent` processes, and a raw TCP upstream that answers some paths with
// bytes no well-behaved server sends (a second answer nobody asked for, a body after HEAD or
// 204, both Content-Length and Transfer-Encoding, bad chunks, 100 and 101, a cut body). The
// guarantee above all: one client never gets an answer meant for another request, and a
// pooled connection whose state is unknown is not used again.
import net from 'node:net';
import { Readable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentConfigFile, credentialToken, startAgent, tunnels, type AgentProcess } from '../helpers/agent.js';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

/** A request as the raw upstream took it: its connection's serial, method and path. */
interface Seen { conn: number; method: string; path: string; body: string; expect?: string; chunked: boolean; names?: string[] }

/** A fake answer: a complete 200 with its own body, which no client asked for. */
const FAKE = 'HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nSMUGGLED';
const ok = (body: string, extra = '') => `HTTP/1.1 200 OK\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

/**
 * A raw HTTP/1.1 upstream: requests parsed one after another on each connection (Content-Length
 * or chunked bodies), answered by the last segment of their path. `/…/who` (and anything not
 * named) answers JSON naming the connection and the path it was asked.
 */
function rawUpstream(name: string) {
  const seen: Seen[] = [];
  /** Connections the upstream saw close, and the bytes each has received. */
  const closed = new Set<number>();
  const received = new Map<number, number>();
  let serial = 0;
  const answers: Record<string, (s: net.Socket, r: Seen) => void> = {
    smuggle: (s) => s.write(ok('ok') + FAKE),
    'smuggle-late': (s) => { s.write(ok('ok')); setTimeout(() => { if (!s.destroyed) s.write(FAKE); }, 30); },
    'head-body': (s) => s.write(`HTTP/1.1 200 OK\r\ncontent-length: ${FAKE.length}\r\n\r\n${FAKE}`),
    'no-content': (s) => s.write(`HTTP/1.1 204 No Content\r\n\r\n${FAKE}`),
    'not-modified': (s) => s.write('HTTP/1.1 304 Not Modified\r\netag: "x"\r\n\r\n'),
    'cl-te': (s) => s.write(`HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n${FAKE}`),
    'bad-chunk': (s) => s.write(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nZZ\r\nok\r\n0\r\n\r\n${FAKE}`),
    continue: (s) => s.write(`HTTP/1.1 100 Continue\r\n\r\n${ok('continued')}`),
    hold: () => {},
    'status-600': (s) => s.write('HTTP/1.1 600 Beyond\r\ncontent-length: 2\r\n\r\nok'),
    'twice-typed': (s) => s.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-type: text/html\r\ncontent-length: 2\r\n\r\nok'),
    'status-099': (s) => s.write('HTTP/1.1 099 Below\r\ncontent-length: 2\r\n\r\nok'),
    slow: (s) => { setTimeout(() => { if (!s.destroyed) s.write(ok('slow')); }, 300); },
    hints: (s) => s.write(`HTTP/1.1 103 Early Hints\r\nlink: </app.css>; rel=preload\r\n\r\n${ok('hinted')}`),
    switch: (s) => s.write(`HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: evil\r\n\r\n${FAKE}`),
    eof: (s) => s.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end'),
    'huge-head': (s) => s.write(ok('big', `x-big: ${'a'.repeat(100_000)}\r\n`)),
    cut: (s) => { s.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789'); setTimeout(() => s.destroy(), 20); },
  };
  const server = net.createServer((socket) => {
    const conn = ++serial;
    socket.on('error', () => {});
    socket.on('close', () => closed.add(conn));
    let buf = Buffer.alloc(0);
    socket.on('data', (c) => {
      received.set(conn, (received.get(conn) ?? 0) + c.length);
      buf = Buffer.concat([buf, c]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
        const [method, path] = lines[0].split(' ');
        const headers = Object.fromEntries(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
        let rest = buf.subarray(end + 4);
        if (path.endsWith('/early')) {
          // Answers at once and reads what follows as the next request, body or not (a naive server).
          seen.push({ conn, method, path, body: '', chunked: false });
          buf = rest;
          socket.write(ok('early'));
          continue;
        }
        const chunks: Buffer[] = [];
        if (headers['transfer-encoding'] === 'chunked') {
          for (;;) {
            const line = rest.indexOf('\r\n');
            if (line < 0) return;
            const size = parseInt(rest.subarray(0, line).toString(), 16);
            if (rest.length < line + 2 + size + 2) return;
            chunks.push(rest.subarray(line + 2, line + 2 + size));
            rest = rest.subarray(line + 2 + size + 2);
            if (size === 0) break;
          }
        } else {
          const length = Number(headers['content-length'] ?? 0);
          if (rest.length < length) return;
          chunks.push(rest.subarray(0, length));
          rest = rest.subarray(length);
        }
        buf = rest;
        const r = { conn, method, path, body: Buffer.concat(chunks).toString(), expect: headers.expect, chunked: headers['transfer-encoding'] === 'chunked', names: Object.keys(headers) };
        seen.push(r);
        const answer = answers[path.split('?')[0].split('/').pop() ?? ''];
        if (answer) answer(socket, r);
        else {
          const body = JSON.stringify({ upstream: name, ...r });
          socket.write(method === 'HEAD' ? `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n` : ok(body));
        }
      }
    });
  });
  return { server, seen, closed, received, opened: () => serial };
}

let local: TestServer;
let ingress: HttpIngress;
let table: ReturnType<typeof tableOf>;
const agents: AgentProcess[] = [];
const upA = rawUpstream('A');
const upB = rawUpstream('B');

const portOf = (s: net.Server) => (s.address() as AddressInfo).port;

beforeAll(async () => {
  await Promise.all([upA, upB].map((u) => new Promise<void>((r) => u.server.listen(0, '127.0.0.1', r))));
  local = await startTestServer({ agentHeartbeatMs: 1000, agentRelayPool: 1 });
  const cr = await credentialToken(local);
  // Session one: two tunnels, to two upstreams; session two: a tunnel to the first upstream under another prefix.
  const both = agentConfigFile([
    'tunnels:',
    `  a: { labels: { app: a }, forwards_to: "http://127.0.0.1:${portOf(upA.server)}/a" }`,
    `  b: { labels: { app: b }, forwards_to: "http://127.0.0.1:${portOf(upB.server)}/b" }`,
  ].join('\n'));
  agents.push(startAgent(['--api-url', local.url, '--authtoken', cr.token, '--config', both]));
  agents.push(startAgent(['--api-url', local.url, '--authtoken', cr.token, '--label', 'app=c', '--forwards-to', `http://127.0.0.1:${portOf(upA.server)}/c`]));
  await until(async () => (await tunnels(local)).length === 3, 30_000, () => agents.map((a) => a.output()).join('\n'));
  const backend = (name: string) => ({ backend: { enabled: true, backend_id: `bkdtg_${name}` } });
  const edge = (name: string) => ({ id: `edghts_${name}`, hostports: [`${name}.example.com:443`], routes: [
    route(`edghtsrt_${name}`, '/', backend(name)),
    // Connection-specific headers a route adds (the API takes any name): HTTP/1.1 to the upstream must not carry them.
    route(`edghtsrt_${name}hop`, '/hop', { ...backend(name), request_headers: { enabled: true, add: { 'keep-alive': 'timeout=5', upgrade: 'h2c', 'transfer-encoding': 'gzip', connection: 'close', 'proxy-connection': 'keep-alive', te: 'trailers', expect: '100-continue', 'x-kept': 'yes' } } }),
  ] });
  table = tableOf({
    edges: ['a', 'b', 'c'].map(edge),
    backends: ['a', 'b', 'c'].map((n) => ({ id: `bkdtg_${n}`, kind: 'TunnelGroupBackend', labels: { app: n } })),
  });
  ingress = await startHttpIngress(table, { gateway: local.server.gateway, upstreamTimeoutMs: 1000 });
});

afterAll(async () => {
  for (const a of agents) a.kill();
  await ingress?.close();
  await local?.close();
  for (const u of [upA, upB]) u.server.close();
  removeTempDirs();
});

const counts = () => local.server.gateway.relayed;
const send = (path: string, o: { host?: string; method?: string; body?: string } = {}) => ingress.get(path, { host: o.host ?? 'a.example.com', method: o.method, body: o.body });

/** Requests until one went over the pooled connection; returns the upstream connection it used. */
async function warmPooled(host = 'a.example.com'): Promise<number> {
  let conn = 0;
  await until(async () => {
    const before = counts().pooled;
    const r = await send('/who?warm', { host });
    expect(r.status).toBe(200);
    conn = JSON.parse(r.text).conn;
    return counts().pooled > before;
  }, 10_000, () => 'no request went over a pooled connection');
  return conn;
}

/** Normal requests after a hostile one: each gets its own answer (its own path back), never the fake one. */
async function answeredRightly(tag: string, n = 4): Promise<number[]> {
  const conns: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await send(`/who?${tag}=${i}`);
    expect(r.text).not.toContain('SMUGGLED');
    expect(r.status).toBe(200);
    const body = JSON.parse(r.text);
    expect(body.path).toBe(`/a/who?${tag}=${i}`);
    conns.push(body.conn);
  }
  return conns;
}

/** The hostile request goes over the pooled connection `conn`; the upstream saw it there. */
function onConn(path: string, conn: number) {
  return upA.seen.some((s) => s.conn === conn && s.path === `/a${path}`);
}

describe('a pooled connection to a hostile upstream', { timeout: 20_000 }, () => {
  it('a second answer sent after the first never reaches the next client, and the connection is dropped', async () => {
    for (const path of ['/smuggle', '/smuggle-late']) {
      const conn = await warmPooled();
      const r = await send(path);
      expect([r.status, r.text]).toEqual([200, 'ok']);
      expect(onConn(path, conn)).toBe(true);
      await new Promise((res) => setTimeout(res, 100));
      const later = await answeredRightly(path.slice(1));
      expect(later).not.toContain(conn);
    }
  });

  it('HEAD, 204 and 304: no body is read, a body the upstream sends anyway ends the connection', async () => {
    let conn = await warmPooled();
    const head = await send('/who', { method: 'HEAD' });
    expect([head.status, head.body.length]).toEqual([200, 0]);
    // (Without Connection: keep-alive on a HEAD answer, undici closes the connection: not reused, not wrong.)
    await answeredRightly('after-head', 2);
    for (const [path, method, status] of [['/head-body', 'HEAD', 200], ['/no-content', 'GET', 204]] as const) {
      conn = await warmPooled();
      const r = await send(path, { method });
      expect([r.status, r.text]).toEqual([status, '']);
      expect(onConn(path, conn)).toBe(true);
      await new Promise((res) => setTimeout(res, 50));
      expect(await answeredRightly(path.slice(1))).not.toContain(conn);
    }
    conn = await warmPooled();
    const nm = await send('/not-modified');
    expect([nm.status, nm.text, nm.headers.etag]).toEqual([304, '', '"x"']);
    expect(await answeredRightly('after-304', 2)).toEqual([conn, conn]);
  });

  it('an answer no client may get (Content-Length with chunked, 101, a huge head, a 100 Continue nobody asked for, which undici refuses): 502 with the edge\'s code, the connection dropped', async () => {
    for (const path of ['/cl-te', '/switch', '/huge-head', '/continue']) {
      const conn = await warmPooled();
      const r = await send(path);
      expect(r.text).not.toContain('SMUGGLED');
      expect(r.status).toBe(502);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_743');
      expect(onConn(path, conn)).toBe(true);
      expect(await answeredRightly(path.slice(1), 2)).not.toContain(conn);
    }
  });

  it('an invalid chunked body right after the head: the server does not crash (no uncaught error), the client never gets a complete answer', async () => {
    const uncaught: unknown[] = [];
    const record = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', record);
    try {
      const conn = await warmPooled();
      const bad = await send('/bad-chunk').then((r) => r, (e: Error) => e);
      if (!(bad instanceof Error)) {
        expect(bad.text).not.toContain('SMUGGLED');
        expect(bad.status).toBe(502);
      }
      expect(await answeredRightly('bad-chunk', 2)).not.toContain(conn);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', record);
    }
  });

  it('103 Early Hints before the answer (Node\'s writeEarlyHints): the answer, over the same connection after', async () => {
    const conn = await warmPooled();
    for (const method of ['GET', 'POST']) {
      const h = await send('/hints', { method, body: method === 'POST' ? 'x'.repeat(10) : undefined });
      expect([h.status, h.text]).toEqual([200, 'hinted']);
      expect(onConn('/hints', conn)).toBe(true);
      expect(await answeredRightly(`hints-${method}`, 2)).toEqual([conn, conn]);
    }
    // With the pooled connection busy, as a stream of its own: the agent skips the hints too.
    await warmPooled();
    const busy = send('/slow');
    await until(() => upA.seen.some((s) => s.path === '/a/slow'), 5000);
    const streams = counts().stream;
    const h = await send('/hints');
    expect([h.status, h.text]).toEqual([200, 'hinted']);
    expect(counts().stream).toBe(streams + 1);
    expect((await busy).text).toBe('slow');
  });

  it('an answer ended by close: the whole body, then a new connection', async () => {
    const conn = await warmPooled();
    const e = await send('/eof');
    expect([e.status, e.text]).toEqual([200, 'until the end']);
    expect(await answeredRightly('eof', 2)).not.toContain(conn);
  });

  it('a body cut short: the client sees a failed answer, never a complete one, and the next requests are answered', async () => {
    const conn = await warmPooled();
    const cut = await send('/cut').then((r) => r, (e: Error) => e);
    if (!(cut instanceof Error)) expect(cut.status).toBe(502);
    expect(await answeredRightly('cut', 2)).not.toContain(conn);
  });
});

describe('an answer HTTP/2 cannot carry', { timeout: 20_000 }, () => {
  it('(a status outside 200-599, two Content-Type headers): a 502 with the edge\'s code, as on a stream, and the server does not crash', async () => {
    const uncaught: unknown[] = [];
    const record = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', record);
    const http2 = await import('node:http2');
    const tls = await startHttpIngress(table, { gateway: local.server.gateway, upstreamTimeoutMs: 1000 }, { tls: true });
    const session = http2.connect(tls.url, { rejectUnauthorized: false });
    session.on('error', () => {});
    try {
      const h2get = (path: string) => new Promise<{ status: number; code: unknown }>((resolve, reject) => {
        const st = session.request({ ':path': path, ':authority': 'a.example.com' });
        st.on('response', (h) => { st.resume(); st.on('end', () => resolve({ status: Number(h[':status']), code: h['edgeform-error-code'] })); });
        st.on('error', reject);
        st.setTimeout(5000, () => reject(new Error(`no answer to ${path}`)));
      });
      for (const [path, viaH2] of [['/status-600', true], ['/status-600', false], ['/status-099', false], ['/status-099', true], ['/twice-typed', true]] as const) {
        await warmPooled();
        const r = viaH2 ? await h2get(path) : await send(path).then((x) => ({ status: x.status, code: x.headers['edgeform-error-code'] }));
        expect([path, viaH2, r.status, r.code]).toEqual([path, viaH2, 502, 'ERR_SERVICE_743']);
      }
      // The access log says what the HTTP/2 client got, not the head it could not be given.
      const logged = tls.logs.filter((l) => l.msg === 'ingress request').map((l) => [l.path, l.status, l.code]);
      expect(logged).toEqual([['/status-600', 502, 'ERR_SERVICE_743'], ['/status-099', 502, 'ERR_SERVICE_743'], ['/twice-typed', 502, 'ERR_SERVICE_743']]);
      expect(await answeredRightly('after-status', 2)).toHaveLength(2);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', record);
      session.close();
      await tls.close();
    }
  });
});

describe('a pooled connection and a hostile or broken client', { timeout: 20_000 }, () => {
  it('a chunked request body goes up whole over the pooled connection, and Expect: 100-continue is answered at the edge', async () => {
    const conn = await warmPooled();
    async function* parts() { for (const p of ['one,', 'two,', 'three']) yield Buffer.from(p); }
    const r = await ingress.get('/who?chunked', { host: 'a.example.com', method: 'POST', body: Readable.from(parts()) as never });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toMatchObject({ conn, path: '/a/who?chunked', body: 'one,two,three', chunked: true });
    // A raw client that waits for 100 Continue before its body, as curl does.
    const socket = net.connect(ingress.port, '127.0.0.1');
    socket.on('error', () => {});
    let out = '';
    socket.on('data', (c) => { out += c; });
    socket.write('POST /who?expect HTTP/1.1\r\nhost: a.example.com\r\ncontent-length: 5\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n');
    await until(() => out.includes('100 Continue'), 5000, () => `no 100 Continue: ${out}`);
    socket.write('hello');
    await until(() => out.includes('}'), 5000, () => `no answer: ${out}`);
    socket.destroy();
    const answer = JSON.parse(out.slice(out.indexOf('{')));
    expect(answer).toMatchObject({ conn, path: '/a/who?expect', body: 'hello' });
    expect(answer.expect).toBeUndefined();
  });

  it('a client that goes away halfway through its upload: the upstream connection is closed, never reused, and the next requests are answered', async () => {
    const conn = await warmPooled();
    const pooled = counts().pooled;
    const socket = net.connect(ingress.port, '127.0.0.1');
    socket.on('error', () => {});
    socket.write(`POST /who?half HTTP/1.1\r\nhost: a.example.com\r\ncontent-length: 1000\r\n\r\n${'x'.repeat(500)}`);
    const had = upA.received.get(conn) ?? 0;
    await until(() => (upA.received.get(conn) ?? 0) > had + 500, 5000, () => 'the upload never reached the upstream');
    expect(counts().pooled).toBe(pooled + 1);
    socket.destroy();
    await until(() => upA.closed.has(conn), 5000, () => 'the upstream connection stayed open');
    expect(await answeredRightly('after-half', 3)).not.toContain(conn);
    expect(upA.seen.some((s) => s.path === '/a/who?half')).toBe(false);
  });
});

describe('an upstream that answers before the request body has come', { timeout: 20_000 }, () => {
  it('the rest of the body never reaches the upstream as a request of the next client\'s connection: the pooled connection is dropped', async () => {
    const conn = await warmPooled();
    // The body is two requests; undici sends the head with the body's first part, the second comes later.
    const inner = (n: number) => `GET /a/who?smuggled=${n} HTTP/1.1\r\nhost: a.example.com\r\n\r\n`;
    const socket = net.connect(ingress.port, '127.0.0.1');
    socket.on('error', () => {});
    let out = '';
    socket.on('data', (c) => { out += c; });
    socket.write(`POST /early HTTP/1.1\r\nhost: a.example.com\r\ncontent-length: ${inner(1).length + inner(2).length}\r\n\r\n${inner(1)}`);
    await until(() => out.includes('early'), 5000, () => `no early answer: ${out}`);
    expect(upA.seen.some((s) => s.conn === conn && s.path === '/a/early')).toBe(true);
    socket.write(inner(2));
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    const later = await answeredRightly('after-early', 3);
    expect(later).not.toContain(conn);
    // Whatever the upstream made of the body, it came on the early request's connection only.
    expect(upA.seen.filter((s) => s.path.startsWith('/a/who?smuggled')).every((s) => s.conn === conn)).toBe(true);
  });
});

describe('connection-specific headers a route adds', { timeout: 20_000 }, () => {
  it('are not sent upstream over the pooled connection, and a POST is answered (not refused as if the upstream had failed)', async () => {
    for (const method of ['POST', 'GET']) {
      const conn = await warmPooled();
      const pooled = counts().pooled;
      const r = await send('/hop', { method, body: method === 'POST' ? 'posted' : undefined });
      expect(r.status).toBe(200);
      const body = JSON.parse(r.text);
      expect([body.conn, body.path, body.body]).toEqual([conn, '/a/hop', method === 'POST' ? 'posted' : '']);
      expect(body.names).toContain('x-kept');
      for (const name of ['keep-alive', 'upgrade', 'transfer-encoding', 'proxy-connection', 'te', 'expect']) expect(body.names).not.toContain(name);
      expect(counts().pooled).toBe(pooled + 1);
      expect(await answeredRightly(`hop-${method}`, 1)).toEqual([conn]);
    }
  });
});

describe('pooled connections and tenants', { timeout: 20_000 }, () => {
  it('150 requests at once over three tunnels (one pooled connection each, the rest as streams): each gets its own answer, and tunnels of one session or of two never share a connection', async () => {
    upA.seen.length = 0;
    const hosts = ['a', 'b', 'c'];
    const post = (i: number) => i % 2 === 1;
    const replies = await Promise.all(Array.from({ length: 150 }, (_v, i) => send(`/who?t=${i}`, { host: `${hosts[i % 3]}.example.com`, method: post(i) ? 'POST' : 'GET', body: post(i) ? `body-${i}` : undefined })));
    for (const [i, r] of replies.entries()) {
      expect(r.status).toBe(200);
      const body = JSON.parse(r.text);
      const host = hosts[i % 3];
      expect(body.upstream).toBe(host === 'b' ? 'B' : 'A');
      expect([body.path, body.body]).toEqual([`/${host}/who?t=${i}`, post(i) ? `body-${i}` : '']);
    }
    // Each connection of upstream A carried requests of one tunnel only.
    const prefixes = new Map<number, Set<string>>();
    for (const s of upA.seen) (prefixes.get(s.conn) ?? prefixes.set(s.conn, new Set()).get(s.conn)!).add(s.path.split('/')[1]);
    for (const p of prefixes.values()) expect(p.size).toBe(1);
  });
});

describe('an agent that goes away with a pooled request in flight', { timeout: 20_000 }, () => {
  it('the request is answered 502 at once (not the 504 of the 1 s upstream timeout), then the tunnel is gone, with no uncaught error', async () => {
    const uncaught: unknown[] = [];
    const record = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', record);
    process.on('unhandledRejection', record);
    try {
      await warmPooled('c.example.com');
      const pooled = counts().pooled;
      const busy = send('/hold', { host: 'c.example.com' });
      await until(() => upA.seen.some((s) => s.path === '/c/hold'), 5000, () => 'the upstream never got /c/hold');
      expect(counts().pooled).toBe(pooled + 1);
      agents[1].kill();
      const r = await busy;
      expect(r.status).toBe(502);
      expect(['ERR_SERVICE_742', 'ERR_SERVICE_743']).toContain(r.headers['edgeform-error-code']);
      await until(async () => (await tunnels(local)).length === 2, 10_000, () => 'the session did not end');
      const after = await send('/who', { host: 'c.example.com' });
      expect(after.status).toBe(502);
      // The other session's tunnels are untouched.
      expect(await answeredRightly('after-kill', 2)).toHaveLength(2);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', record);
      process.off('unhandledRejection', record);
    }
  });
});

describe('idle pooled connections', { timeout: 20_000 }, () => {
  it('are closed after 2 s idle: every upstream connection opened so far closes (the agent\'s own kept-alive ones after 4 s)', async () => {
    const r = await send('/who?last');
    expect(r.status).toBe(200);
    const open = (u: typeof upA) => Array.from({ length: u.opened() }, (_v, i) => i + 1).filter((c) => !u.closed.has(c));
    expect(open(upA).length).toBeGreaterThan(0);
    await until(() => open(upA).length + open(upB).length === 0, 10_000, () => `still open: A ${open(upA)}, B ${open(upB)}`);
  });
});
