// Issue 33's figures: requests per second and p50/p99 through a tunnel held by another
// instance (one extra hop: the peer channel) beside the same through a local tunnel, in
// alternating rounds of one run; then the total through one, two and three instances at once.
// Three `edgeform serve` processes on one throwaway PostgreSQL cluster, each with
// --peer-listen; one `edgeform agent` on instance 1 with a label; an HTTPS edge whose route
// goes to that label; a local upstream answering 200. The load generator (this process)
// speaks HTTPS/1.1 with keep-alive, `--concurrency` connections per target.
// Usage: npx tsx bench/peers.ts [--requests 3000] [--rounds 3] [--concurrency 16]
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: a plain .mjs script without types
import { startPostgres } from '../scripts/pg-cluster.mjs';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const REQUESTS = arg('requests', 3000);
const ROUNDS = arg('rounds', 3);
const CONCURRENCY = arg('concurrency', 16);
const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const KEY = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff';
const HOST = 'bench.example.com';
const children: ChildProcess[] = [];

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function run(args: string[], env: Record<string, string>, ready: RegExp): Promise<{ child: ChildProcess; out: () => string }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => { out += d; });
  child.stderr!.on('data', (d) => { out += d; });
  return new Promise((resolve, reject) => {
    const t = setInterval(() => {
      if (ready.test(out)) { clearInterval(t); resolve({ child, out: () => out }); }
      if (child.exitCode !== null) { clearInterval(t); reject(new Error(`${args[0]} exited: ${out}`)); }
    }, 50);
  });
}

async function main() {
  const pg = await startPostgres();
  try {
    const db = await pg.createDatabase('bench');
    const instances: { api: string; ingress: number; dir: string }[] = [];
    for (let n = 0; n < 3; n++) {
      const ingress = await freePort();
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-peers-'));
      const s = await run(['serve', '--port', '0', '--database', db, '--data-dir', dir, '--ingress', `443=127.0.0.1:${ingress}`, '--peer-listen', '127.0.0.1:0', '--api-rate-limit', '0',
        '--ingress-relays-per-client', '0', '--ingress-connections-per-client', '0'],
      { EDGEFORM_SECRET_KEY: KEY, EDGEFORM_BOOTSTRAP_TOKEN: TOKEN }, /listening on/);
      const url = /"url":"([^"]+)"/.exec(s.out())![1];
      instances.push({ api: url, ingress, dir });
    }
    const api = async (method: string, p: string, body?: unknown) => {
      const r = await fetch(`${instances[0].api}${p}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return r.json() as Promise<any>;
    };
    const upstream = http.createServer((_req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('ok'); });
    upstream.keepAliveTimeout = 600_000;
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const cr = await api('POST', '/credentials', { acl: [] });
    await run(['agent', '--api-url', instances[0].api, '--authtoken', cr.token, '--label', 'app=bench', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`], {}, /online: tn_/);
    const backend = await api('POST', '/backends/tunnel_group', { labels: { app: 'bench' } });
    const edge = await api('POST', '/edges/https', { hostports: [`${HOST}:443`] });
    await api('POST', `/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backend.id } });
    const ca = await (async () => {
      const file = path.join(instances[0].dir, 'ingress-ca.pem');
      for (let i = 0; i < 400 && !fs.existsSync(file); i++) {
        await new Promise<void>((r) => { const s = tls.connect({ host: '127.0.0.1', port: instances[0].ingress, servername: HOST, rejectUnauthorized: false }, () => { s.destroy(); r(); }); s.on('error', () => r()); });
        await new Promise((r) => setTimeout(r, 50));
      }
      return fs.readFileSync(file, 'utf8');
    })().catch(() => '');
    const agents = instances.map(() => new https.Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca: ca || undefined, rejectUnauthorized: !!ca, servername: HOST }));
    const get = (n: number) => new Promise<void>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port: instances[n].ingress, path: '/', headers: { host: HOST }, agent: agents[n], servername: HOST }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end();
    });
    // Every instance reaches the tunnel.
    for (let n = 0; n < 3; n++) {
      for (let i = 0; ; i++) {
        try { await get(n); break; } catch (e) { if (i > 400) throw e; await new Promise((r) => setTimeout(r, 50)); }
      }
    }
    /** `total` requests spread over `targets`, CONCURRENCY in flight per target. */
    const load = async (targets: number[], total: number) => {
      const lat: number[] = [];
      let next = 0;
      let failed = 0;
      const t0 = process.hrtime.bigint();
      await Promise.all(targets.flatMap((n) => Array.from({ length: CONCURRENCY }, async () => {
        while (next++ < total) {
          const t = process.hrtime.bigint();
          await get(n).catch(() => { failed++; });
          lat.push(Number(process.hrtime.bigint() - t) / 1e6);
        }
      })));
      const secs = Number(process.hrtime.bigint() - t0) / 1e9;
      lat.sort((a, b) => a - b);
      return { rps: total / secs, p50: pct(lat, 50), p99: pct(lat, 99), failed };
    };
    await load([0], 500);
    await load([1], 500);
    const rows: Record<string, { rps: number[]; p50: number[]; p99: number[]; failed: number }> = {};
    const add = (name: string, r: { rps: number; p50: number; p99: number; failed: number }) => {
      const row = (rows[name] ??= { rps: [], p50: [], p99: [], failed: 0 });
      row.rps.push(r.rps); row.p50.push(r.p50); row.p99.push(r.p99); row.failed += r.failed;
    };
    for (let round = 0; round < ROUNDS; round++) {
      add('local tunnel (instance 1, holds the agent)', await load([0], REQUESTS));
      add('remote tunnel (instance 2, one peer hop)', await load([1], REQUESTS));
      add('instances 1+2 at once', await load([0, 1], REQUESTS));
      add('instances 1+2+3 at once', await load([0, 1, 2], REQUESTS));
    }
    console.log(`\n${REQUESTS} requests per round, ${ROUNDS} rounds (alternating), ${CONCURRENCY} keep-alive connections per instance; medians; load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')} on ${os.cpus().length} cores\n`);
    console.log('| target | requests/s | p50 ms | p99 ms | failed |');
    console.log('|---|---|---|---|---|');
    for (const [name, r] of Object.entries(rows)) console.log(`| ${name} | ${median(r.rps).toFixed(0)} | ${median(r.p50).toFixed(1)} | ${median(r.p99).toFixed(1)} | ${r.failed} |`);
    upstream.close();
  } finally {
    for (const c of children) c.kill('SIGKILL');
    pg.stop();
  }
}

main().catch((e) => { console.error(e); for (const c of children) c.kill('SIGKILL'); process.exit(1); });
