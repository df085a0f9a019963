// Relayed HTTP requests over pooled upstream connections (server/gateway/relay-pool.ts), with
// real processes: `edgeform serve --agent-relay-pool 2` and `--agent-relay-pool 0`, an
// `edgeform agent` for each, a local upstream that tells which of its connections served a
// request. Pooled requests are seen in /metrics (edgeform_ingress_relayed_requests_total by
// transport) and by the upstream (one kept-alive connection serves one request after another);
// more in flight than the pool holds go as their own streams; bodies stream both ways; a client
// gone cancels the upstream request; an upstream that closes its connection costs nothing.
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, many, startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest, h2Echoed } from '../helpers/ingress-client.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { credentialToken, tunnels } from '../helpers/agent.js';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';
import { freePort } from '../helpers/ports.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const MiB = 1024 * 1024;
let upstream: http.Server;
let connections = 0;
/** Requests to /hold: whether the upstream saw each one's connection close before it answered. */
const holds: { closed: boolean }[] = [];
/** Methods of the requests to /drop the upstream took. */
const drops: string[] = [];
const agents: AgentProcess[] = [];
let pooled: Ingress;
let unpooled: Ingress;
let ca: string;
let caOff: string;

function upstreamServer(): http.Server {
  const s = http.createServer((req, res) => {
    const socket = req.socket as Socket & { serial?: number };
    const p = (req.url ?? '/').split('?')[0];
    if (p === '/base/echo') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return void req.pipe(res);
    }
    if (p === '/base/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let sent = 0;
      const more = () => {
        while (sent < 32) {
          sent++;
          if (!res.write(Buffer.alloc(MiB, sent))) return void res.once('drain', more);
        }
        res.end();
      };
      return more();
    }
    if (p === '/base/hold') {
      const hold = { closed: false };
      holds.push(hold);
      res.on('close', () => { hold.closed = !res.writableFinished; });
      return;
    }
    if (p === '/base/close') return void res.writeHead(200, { connection: 'close' }).end('closing');
    if (p === '/base/drop') {
      // Takes the request, then drops the connection without an answer (an upstream that crashed handling it).
      drops.push(req.method ?? '');
      return void req.socket.destroy();
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ url: req.url, conn: socket.serial, headers: req.headers }));
  });
  s.on('connection', (c: Socket & { serial?: number }) => { c.serial = ++connections; });
  return s;
}

const manifest = () => [
  { kind: 'TunnelGroupBackend', name: 'web', labels: { app: 'web' } },
  { kind: 'HTTPSEdge', name: 'web', hostports: ['app.example.com:443'], routes: [{ match_type: 'path_prefix', match: '/', backend: { backend_id: 'TunnelGroupBackend/web' } }] },
].map((d) => stringify(d)).join('---\n');

async function edgeWithAgent(poolArgs: string[], upstreamPort: number): Promise<Ingress> {
  const ing = await startIngress([443], {}, poolArgs);
  await ing.apply(manifest());
  const token = await agentToken(ing);
  // forwards_to with a path: the pooled connection puts the prefix in front as the agent would.
  agents.push(startAgent(['--authtoken', token, '--label', 'app=web', '--forwards-to', `http://127.0.0.1:${upstreamPort}/base`], { EDGEFORM_API_URL: ing.url }));
  await until(async () => (await ing.api('GET', '/tunnels')).body.tunnels?.length === 1, 30_000, () => agents.map((a) => a.output()).join('\n'));
  return ing;
}

/** edgeform_ingress_relayed_requests_total by transport, from GET /metrics. */
async function relayed(ing: Ingress): Promise<{ pooled: number; stream: number }> {
  const text = await (await fetch(`${ing.url}/metrics`)).text();
  const of = (t: string) => Number(new RegExp(`^edgeform_ingress_relayed_requests_total\\{transport="${t}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return { pooled: of('pooled'), stream: of('stream') };
}

const get = (ing: Ingress, cert: string, p: string, o: { method?: string; body?: Buffer } = {}) =>
  edgeRequest({ port: ing.port(443), host: 'app.example.com', path: p, ca: cert, ...o });

/**
 * The ingress processes of the `edgeform serve` servers here (EDGEFORM_TEST_WORKERS, test/helpers/serve.ts):
 * each worker keeps a pool of its own, and requests on fresh connections reach them in turn.
 */
const WORKERS = Number(process.env.EDGEFORM_TEST_WORKERS) || 1;

/** Sends requests until one went over a pooled connection (the first ones open it); with workers, until `workers` in a row did (every worker's pool is open). */
async function warmUntil(send: () => Promise<{ status: number }>, pooledCount: () => Promise<number> | number, workers = 1) {
  let inRow = 0;
  await until(async () => {
    const before = await pooledCount();
    expect((await send()).status).toBe(200);
    inRow = (await pooledCount()) > before ? inRow + 1 : 0;
    return inRow >= workers;
  }, 10_000, () => 'no request went over a pooled connection');
}
const warm = (ing: Ingress, cert: string) => warmUntil(() => get(ing, cert, '/who'), async () => (await relayed(ing)).pooled, WORKERS);

let local: TestServer;
let inProcess: HttpIngress;

beforeAll(async () => {
  upstream = upstreamServer();
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const port = (upstream.address() as AddressInfo).port;
  [pooled, unpooled] = await Promise.all([edgeWithAgent(['--agent-relay-pool', '2'], port), edgeWithAgent(['--agent-relay-pool', '0'], port)]);
  ca = await pooled.ca();
  caOff = await unpooled.ca();
  // The HTTP handler in this process on the gateway of an in-process server, for what needs a
  // short upstream timeout or an HTTP/2 client: the gateway's own counts are read directly.
  local = await startTestServer({ agentHeartbeatMs: 1000, agentRelayPool: 2 });
  const cr = await credentialToken(local);
  agents.push(startAgent(['--api-url', local.url, '--authtoken', cr.token, '--label', 'app=web', '--forwards-to', `127.0.0.1:${port}/base`]));
  agents.push(startAgent(['--api-url', local.url, '--authtoken', cr.token, '--label', 'app=down', '--forwards-to', `127.0.0.1:${await freePort()}`]));
  await until(async () => (await tunnels(local)).length === 2, 30_000, () => agents.map((a) => a.output()).join('\n'));
  inProcess = await handlerOnLocal(false);
});

/** The HTTP handler on the in-process gateway, with a 1 s upstream timeout; `tls` for HTTP/2 clients. */
const handlerOnLocal = (tls: boolean) => startHttpIngress(tableOf({
  edges: [{ id: 'edghts_app', hostports: ['app.example.com:443'], routes: [
    route('edghtsrt_web', '/', { backend: { enabled: true, backend_id: 'bkdtg_web' } }),
    route('edghtsrt_down', '/down', { backend: { enabled: true, backend_id: 'bkdtg_down' } }),
  ] }],
  backends: [
    { id: 'bkdtg_web', kind: 'TunnelGroupBackend', labels: { app: 'web' } },
    { id: 'bkdtg_down', kind: 'TunnelGroupBackend', labels: { app: 'down' } },
  ],
}), { gateway: local.server.gateway, upstreamTimeoutMs: 1000 }, { tls });

afterAll(async () => {
  for (const a of agents) a.kill();
  upstream?.closeAllConnections();
  upstream?.close();
  await inProcess?.close();
  await local?.close();
  killServers();
  removeTempDirs();
});

describe('relayed HTTP requests over pooled upstream connections', () => {
  it('go over one kept-alive upstream connection one after another, with the forwarded headers and the path under the prefix', async () => {
    await warm(pooled, ca);
    const before = await relayed(pooled);
    const replies = [];
    for (let i = 0; i < 6; i++) replies.push(await get(pooled, ca, `/who?i=${i}`));
    const after = await relayed(pooled);
    expect(after.pooled - before.pooled).toBe(6);
    expect(after.stream).toBe(before.stream);
    const seen = replies.map((r) => JSON.parse(r.text));
    // One kept-alive connection (each worker's own, with workers).
    expect(new Set(seen.map((s) => s.conn)).size).toBe(WORKERS);
    expect(seen[3].url).toBe('/base/who?i=3');
    expect(seen[3].headers).toMatchObject({ host: 'app.example.com', 'x-forwarded-for': '127.0.0.1', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com' });
    expect(seen[3].headers['edgeform-tunnel-id']).toBeUndefined();
  });

  it('send what the pool cannot take at once as their own streams, and every request is answered', async () => {
    await warm(pooled, ca);
    const before = await relayed(pooled);
    const replies = await many(40, 8, (i) => get(pooled, ca, `/who?n=${i}`));
    expect(replies.map((r) => r.status)).toEqual(new Array(40).fill(200));
    expect(replies.map((r) => JSON.parse(r.text).url)).toEqual(replies.map((_r, i) => `/base/who?n=${i}`));
    const after = await relayed(pooled);
    expect(after.pooled - before.pooled + after.stream - before.stream).toBe(40);
    expect(after.pooled).toBeGreaterThan(before.pooled);
    expect(after.stream).toBeGreaterThan(before.stream);
  });

  it('stream bodies both ways: 8 MiB up and back, 32 MiB down, intact', async () => {
    const up = Buffer.alloc(8 * MiB);
    for (let i = 0; i < up.length; i += 4096) up.writeUInt32BE(i, i);
    const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    await warm(pooled, ca);
    const before = await relayed(pooled);
    const echoed = await get(pooled, ca, '/echo', { method: 'POST', body: up });
    expect(echoed.status).toBe(200);
    expect(digest(echoed.body)).toBe(digest(up));
    const big = await get(pooled, ca, '/big');
    expect(big.body.length).toBe(32 * MiB);
    expect(big.body[31 * MiB]).toBe(32);
    expect((await relayed(pooled)).pooled - before.pooled).toBe(2);
  });

  it('cancel the upstream request when the client goes away, and the next requests are answered', async () => {
    await warm(pooled, ca);
    const before = await relayed(pooled);
    const req = https.request({ host: '127.0.0.1', port: pooled.port(443), path: '/hold', servername: 'app.example.com', headers: { host: 'app.example.com' }, ca, agent: false });
    req.on('error', () => {});
    req.end();
    await until(() => holds.length === 1, 10_000, () => 'the upstream never got /hold');
    expect((await relayed(pooled)).pooled).toBe(before.pooled + 1);
    // The client's connection goes: the edge aborts the pooled request, the agent closes the upstream connection.
    req.destroy();
    await until(() => holds[0].closed, 10_000, () => 'the upstream request was not cancelled');
    expect((await get(pooled, ca, '/who')).status).toBe(200);
  });

  it('answer after an upstream closed its connection (Connection: close), over the pool again', async () => {
    await warm(pooled, ca);
    const closing = await get(pooled, ca, '/close');
    expect(closing.text).toBe('closing');
    await warm(pooled, ca);
    for (let i = 0; i < 3; i++) expect((await get(pooled, ca, '/who')).status).toBe(200);
  });

  it('a POST whose pooled connection drops before an answer is not sent again (502); a GET is, once, as a stream', async () => {
    await warm(pooled, ca);
    const before = await relayed(pooled);
    const post = await get(pooled, ca, '/drop', { method: 'POST', body: Buffer.alloc(0) });
    expect(post.status).toBe(502);
    expect(post.headers['edgeform-error-code']).toBe('ERR_SERVICE_743');
    expect(drops).toEqual(['POST']);
    expect((await relayed(pooled)).pooled).toBe(before.pooled + 1);
    await warm(pooled, ca);
    const again = await relayed(pooled);
    const gotten = await get(pooled, ca, '/drop');
    expect(gotten.status).toBe(502);
    // Once over the pool, once more as its own stream (which the agent's 502 answers).
    expect(drops).toEqual(['POST', 'GET', 'GET']);
    const after = await relayed(pooled);
    expect([after.pooled - again.pooled, after.stream - again.stream]).toEqual([0, 1]);
  });

  it('with --agent-relay-pool 0, each request is its own HTTP/2 stream', async () => {
    const before = await relayed(unpooled);
    for (let i = 0; i < 5; i++) {
      const r = await get(unpooled, caOff, `/who?off=${i}`);
      expect(JSON.parse(r.text).url).toBe(`/base/who?off=${i}`);
    }
    const after = await relayed(unpooled);
    expect(after.stream - before.stream).toBe(5);
    expect(after.pooled).toBe(0);
  });
});

describe('pooled relays and the edge errors (the HTTP handler on an in-process gateway)', () => {
  const counts = () => local.server.gateway.relayed;
  const warmLocal = () => warmUntil(() => inProcess.get('/who'), () => counts().pooled);

  it('an upstream that does not answer in time over a pooled connection: 504 ERR_SERVICE_744, and the upstream request is cancelled', async () => {
    await warmLocal();
    const before = { ...counts() };
    const held = holds.length;
    const r = await inProcess.get('/hold');
    expect(r.status).toBe(504);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_744');
    expect(counts().pooled).toBe(before.pooled + 1);
    await until(() => holds[held]?.closed === true, 10_000, () => 'the late upstream request was not cancelled');
  });

  it('an HTTP/2 client\'s body goes up over a pooled connection and comes back (1 MiB, by digest)', async () => {
    const http2 = await import('node:http2');
    const h2 = await handlerOnLocal(true);
    const session = http2.connect(h2.url, { rejectUnauthorized: false });
    try {
      const h2get = () => new Promise<{ status: number }>((resolve, reject) => {
        const s = session.request({ ':path': '/who', ':authority': 'app.example.com' });
        s.on('response', (h) => { s.resume(); s.on('end', () => resolve({ status: Number(h[':status']) })); });
        s.on('error', reject);
      });
      await warmUntil(h2get, () => counts().pooled);
      const before = counts().pooled;
      expect(await h2Echoed(session, '/echo', 'app.example.com', Buffer.alloc(1024 * 1024, 'h2-pooled-'))).toEqual({ status: 200, same: true });
      expect(counts().pooled).toBe(before + 1);
    } finally {
      session.close();
      await h2.close();
    }
  });

  it('an upstream the agent cannot reach: no pooled connection opens, the requests go as streams and get 502 ERR_SERVICE_743', async () => {
    const before = { ...counts() };
    for (let i = 0; i < 3; i++) {
      const r = await inProcess.get('/down');
      expect(r.status).toBe(502);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_743');
      // What the code means, not which tunnel (the access log's detail names it).
      expect(r.text).toContain('the agent could not reach its forwards_to');
      expect(r.text).not.toContain('tn_');
    }
    expect(counts().pooled).toBe(before.pooled);
    expect(counts().stream).toBe(before.stream + 3);
  });
});
