// `edgeform serve --workers 2` (issue 34): two processes serve the ingress listeners, and the
// ingress still behaves as one server. Each request's access-log line names the worker (its
// pid) that served it; node:cluster hands new connections to the workers in turn, so requests
// on fresh connections reach both.
//  - both workers answer an http_response route and a route through `edgeform agent` (the
//    agent's connection is held by the primary: the workers reach it over the holder channel),
//    over pooled upstream connections of their own, and GET /metrics at the primary counts
//    what every worker served under one process's metric names;
//  - a rate limit of 5 per minute allows 5 requests in all, not 5 per worker, and a route's
//    circuit breaker counts the failures every worker saw;
//  - a change through the API is served by both workers as soon as the API has answered;
//  - SIGTERM lets a request in flight finish, then every worker and the primary exit.
import http from 'node:http';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const HOST = 'workers.example.com';
const policy = stringify({ on_http_request: [{ actions: [{ type: 'rate-limit', config: { name: 'five', algorithm: 'sliding_window', capacity: 5, rate: '60s', bucket_key: ['conn.client_ip'] } }] }] });
const MANIFEST = [
  { kind: 'HTTPResponseBackend', name: 'page', body: 'version one', status_code: 200 },
  { kind: 'TunnelGroupBackend', name: 'web', labels: { app: 'workers' } },
  {
    kind: 'HTTPSEdge',
    name: 'workers',
    hostports: [`${HOST}:443`],
    routes: [
      { match_type: 'path_prefix', match: '/', backend: { backend_id: 'HTTPResponseBackend/page' } },
      { match_type: 'path_prefix', match: '/agent', backend: { backend_id: 'TunnelGroupBackend/web' } },
      {
        match_type: 'path_prefix',
        match: '/failing',
        backend: { backend_id: 'TunnelGroupBackend/web' },
        circuit_breaker: { enabled: true, tripped_duration: 60, rolling_window: 60, num_buckets: 10, volume_threshold: 4, error_threshold_percentage: 0.5 },
      },
      { match_type: 'path_prefix', match: '/limited', backend: { backend_id: 'HTTPResponseBackend/page' }, traffic_policy: { value: policy } },
    ],
  },
].map((d) => stringify(d, { lineWidth: 0 })).join('---\n');

describe('edgeform serve --workers 2', () => {
  let ing: Ingress;
  let ca: string;
  let agent: AgentProcess;
  let upstream: http.Server;
  /** Requests the upstream holds until released (the drain test). */
  const held: (() => void)[] = [];

  /** One request on a connection of its own (so that the workers take turns). */
  const get = (path: string) => edgeRequest({ port: ing.port(443), host: HOST, path, ca });
  /** The workers (pids) whose access-log lines have this path, from line `from` on. */
  const servedBy = (path: string, from = 0) => new Set(ing.lines().slice(from).filter((l) => l.msg === 'ingress request' && l.path === path).map((l) => l.worker));

  beforeAll(async () => {
    upstream = http.createServer((req, res) => {
      if (req.url === '/failing') {
        res.writeHead(500).end('upstream failed');
        return;
      }
      if (req.url === '/agent/slow') {
        held.push(() => res.end('slow answer'));
        return;
      }
      // What the upstream got: the Host the client sent, and the body.
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.end(req.method === 'POST' ? `${req.headers.host} got ${Buffer.concat(chunks).length} bytes` : 'from upstream'));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    ing = await startIngress([443], {}, ['--workers', '2']);
    await ing.apply(MANIFEST);
    ca = await ing.ca();
    agent = startAgent(['--authtoken', await agentToken(ing), '--label', 'app=workers', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`], { EDGEFORM_API_URL: ing.url });
    await until(async () => (await ing.api('GET', '/tunnels')).body.tunnels.length === 1, 30_000, () => `no tunnel online:\n${agent.output()}`);
  });

  afterAll(() => {
    agent?.kill();
    upstream?.closeAllConnections();
    upstream?.close();
    killServers();
    removeTempDirs();
  });

  it('starts two worker processes, and both serve the http_response route', async () => {
    const started = ing.lines().find((l) => String(l.msg).startsWith('ingress served by'));
    expect(started?.workers).toHaveLength(2);
    const workers = started!.workers as number[];
    expect(workers).not.toContain(ing.serving.child.pid);
    for (let i = 0; i < 6; i++) expect((await get('/')).text).toBe('version one');
    await until(() => servedBy('/').size === 2, 10_000, () => `served by ${[...servedBy('/')].join(', ')}`);
    expect([...servedBy('/')].sort()).toEqual([...workers].sort());
  });

  it('reaches the tunnel from both workers (the agent is connected to the primary)', async () => {
    // The tunnel reaches the workers a moment after the API lists it.
    await until(async () => (await get('/agent/x')).text === 'from upstream', 10_000, () => 'the tunnel was not reachable');
    const from = ing.lines().length;
    for (let i = 0; i < 6; i++) {
      const r = await get('/agent/x');
      expect(r.status).toBe(200);
      expect(r.text).toBe('from upstream');
    }
    await until(() => servedBy('/agent/x', from).size === 2, 10_000, () => `served by ${[...servedBy('/agent/x', from)].join(', ')}`);
    // A request with a body, through either worker: the upstream sees the client's Host and every byte.
    const body = Buffer.alloc(300_000, 7);
    for (let i = 0; i < 2; i++) {
      const r = await edgeRequest({ port: ing.port(443), host: HOST, path: '/agent/post', method: 'POST', body, ca });
      expect(r.text).toBe(`${HOST} got ${body.length} bytes`);
    }
  });

  it('relays over pooled upstream connections from the workers, and GET /metrics counts what every worker served, under one process\'s names', async () => {
    /** The sum of a metric's series in GET /metrics (at the primary: the API port). */
    const metric = async (name: string, labels = '') => {
      const text = await (await fetch(`${ing.url}/metrics`)).text();
      let sum = 0;
      for (const m of text.matchAll(new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm'))) if ((m[1] ?? '').includes(labels)) sum += Number(m[2]);
      return sum;
    };
    // The first requests through a worker open its pool (they go as streams of their own meanwhile).
    await until(async () => {
      expect((await get('/agent/x')).status).toBe(200);
      return (await metric('edgeform_ingress_relayed_requests_total', 'transport="pooled"')) >= 2;
    }, 10_000, () => 'no request went over a pooled connection');
    // Every request either worker logged is counted once, whichever worker served it.
    const served = () => ing.lines().filter((l) => l.msg === 'ingress request');
    let counted = 0;
    await until(async () => (counted = await metric('edgeform_ingress_requests_total')) === served().length, 10_000, () => `GET /metrics counts ${counted} requests, the workers logged ${served().length}`);
    expect(new Set(served().map((l) => l.worker)).size).toBe(2);
    expect(await metric('edgeform_ingress_request_duration_seconds_count')).toBe(served().length);
    expect(await metric('edgeform_ingress_connections_total')).toBeGreaterThanOrEqual(served().length);
    // The primary's own metrics are there once, as with one process.
    expect(await metric('edgeform_database_up')).toBe(1);
  });

  it('allows 5 requests in all for a rate limit of 5 per minute, whichever worker serves them', async () => {
    const statuses: number[] = [];
    const from = ing.lines().length;
    for (let i = 0; i < 10; i++) statuses.push((await get('/limited')).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(5);
    // The first five were let through by both workers, counting in one set of buckets.
    await until(() => servedBy('/limited', from).size === 2, 10_000, () => 'one worker served every request');
  });

  it('trips one circuit breaker for the route, counting the failures both workers saw', async () => {
    const from = ing.lines().length;
    // Four failures in all (two on each worker) reach the volume threshold of the breaker.
    for (let i = 0; i < 4; i++) expect((await get('/failing')).status).toBe(500);
    expect(servedBy('/failing', from).size).toBe(2);
    const tripped = await get('/failing');
    expect(tripped.status).toBe(503);
    expect(tripped.headers['edgeform-error-code']).toBe('ERR_SERVICE_747');
    expect(Number(tripped.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('serves a change made through the API on both workers as soon as the API answers', async () => {
    const backend = (await ing.api('GET', '/backends/http_response')).body.backends[0];
    const from = ing.lines().length;
    expect((await ing.api('PATCH', `/backends/http_response/${backend.id}`, { body: 'version two' })).status).toBe(200);
    for (let i = 0; i < 6; i++) expect((await get('/')).text).toBe('version two');
    await until(() => servedBy('/', from).size === 2, 10_000, () => `served by ${[...servedBy('/', from)].join(', ')}`);
  });

  it('drains every worker on SIGTERM: a request in flight finishes, then the workers and the primary exit', async () => {
    const workers = ing.lines().find((l) => String(l.msg).startsWith('ingress served by'))!.workers as number[];
    const slow = get('/agent/slow');
    await until(() => held.length === 1, 10_000, () => 'the slow request did not reach the upstream');
    const exited = ing.serving.exited;
    ing.serving.child.kill('SIGTERM');
    await ing.serving.waitFor(/finishing in-flight requests/);
    // New connections are refused once the workers stop accepting, while the request waits.
    await until(async () => (await get('/').then(() => 'answered', (e: NodeJS.ErrnoException) => e.code)) === 'ECONNREFUSED', 10_000, () => 'the listener still accepted');
    held[0]();
    const r = await slow;
    expect(r.status).toBe(200);
    expect(r.text).toBe('slow answer');
    expect(await exited).toBe(0);
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
  });
});

describe('edgeform serve --workers 2 --ingress-connections-per-client 2', () => {
  afterAll(() => {
    killServers();
    removeTempDirs();
  });

  it('holds the bound for the server: each worker takes its share, so a client keeps 2 connections open, not 2 per worker', async () => {
    const ing = await startIngress([443], {}, ['--workers', '2', '--ingress-connections-per-client', '2']);
    await ing.apply(MANIFEST);
    const ca = await ing.ca();
    const sockets: tls.TLSSocket[] = [];
    const outcomes: string[] = [];
    // One after another, each settled (handshaken, or closed at once) before the next: the workers take them in turn.
    for (let i = 0; i < 4; i++) {
      outcomes.push(await new Promise<string>((resolve) => {
        const s = tls.connect({ host: '127.0.0.1', port: ing.port(443), servername: HOST, ca }, () => resolve('open'));
        sockets.push(s);
        s.on('error', () => resolve('closed'));
        s.on('close', () => resolve('closed'));
      }));
    }
    for (const s of sockets) s.destroy();
    expect(outcomes.filter((o) => o === 'open')).toHaveLength(2);
    // A server of its own (two workers) starts in about 20 s on a loaded 2-core machine.
  }, 120_000);
});
