// Requests relayed through one agent connection vs sent to the upstream directly, at 1, 10
// and 100 concurrent streams; then the server's memory per idle agent session for 1,000.
// Usage: npm run bench:agent [-- --requests 3000 --rounds 3 --streams 1,10,100 --sessions 1000]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveConfig } from '../server/config.js';
import { startServer } from '../server/main.js';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const REQUESTS = arg('requests', 3000);
const ROUNDS = arg('rounds', 3);
const SESSIONS = arg('sessions', 1000);
const STREAMS = (process.argv.includes('--streams') ? process.argv[process.argv.indexOf('--streams') + 1] : '1,10,100').split(',').map(Number);
/** Another build of the agent to measure (a checkout's bin/edgeform.js), for before/after runs. */
const AGENT_BIN = process.env.EDGEFORM_BENCH_AGENT_BIN;
const here = path.dirname(fileURLToPath(import.meta.url));
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** CPU time (ms) a process has used, from /proc (Linux); undefined elsewhere. */
function cpuMsOf(pid: number): number | undefined {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime + stime, in clock ticks of 10 ms
  } catch {
    return undefined;
  }
}

/**
 * Runs `total` requests with `concurrency` in flight; returns rps, latency percentiles (ms),
 * and the CPU time per request (µs) of this process and of the agent: unlike the rate, the
 * CPU cost hardly moves when other work shares the machine.
 */
async function load(concurrency: number, total: number, one: () => Promise<void>, agentPid?: number) {
  const lat: number[] = [];
  let next = 0;
  const cpu0 = process.cpuUsage();
  const agent0 = agentPid === undefined ? undefined : cpuMsOf(agentPid);
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next++ < total) {
      const t = process.hrtime.bigint();
      await one();
      lat.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }));
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const agent1 = agentPid === undefined ? undefined : cpuMsOf(agentPid);
  lat.sort((a, b) => a - b);
  return {
    rps: total / secs, p50: pct(lat, 50), p99: pct(lat, 99),
    cpuUs: (cpu.user + cpu.system) / total,
    agentCpuUs: agent0 === undefined || agent1 === undefined ? 0 : ((agent1 - agent0) * 1000) / total,
  };
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-agent-'));
  // The idle sessions are one credential's (agent-swarm.ts): no per-credential limit here.
  const server = await startServer({ ...resolveConfig({ port: 0, dataDir: dir, apiRateLimit: 0, agentMaxSessionsPerCredential: 0 }, {}), bootstrapToken: TOKEN, log: () => {} });
  const api = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(`${server.url}${p}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
    return r.json() as Promise<any>;
  };
  const upstream = http.createServer((_req, res) => res.end('hello from upstream\n'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const port = (upstream.address() as AddressInfo).port;
  const cr = await api('POST', '/credentials', {});
  const agent = spawn(process.execPath, [AGENT_BIN ?? path.join(here, '..', 'bin', 'edgeform.js'), 'agent', '--api-url', server.url, '--authtoken', cr.token, '--label', 'bench=1', '--forwards-to', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => agent.stdout!.on('data', (c) => { if (String(c).includes('online: tn_')) resolve(); }));
  const tunnelId = (await api('GET', '/tunnels')).tunnels[0].id as string;

  const direct = new http.Agent({ keepAlive: true, maxSockets: 100 });
  const viaDirect = () => new Promise<void>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent: direct }, (res) => { res.resume(); res.on('end', resolve); }).on('error', reject);
  });
  const viaAgent = () => new Promise<void>((resolve, reject) => {
    const stream = server.gateway.openStream(tunnelId, { method: 'GET', path: '/' });
    stream.on('error', reject);
    stream.resume();
    stream.on('end', resolve);
    stream.end();
  });

  const machine = `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${os.type()} ${os.release()}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`;
  console.log(`machine: ${machine}`);
  console.log(`requests per run: ${REQUESTS} (GET, 20-byte response; warm-up excluded); ${ROUNDS} rounds of direct then relayed per level, medians shown${AGENT_BIN ? `; agent: ${AGENT_BIN}` : ''}\n`);
  console.log('streams  direct req/s  relayed req/s  ratio (rounds)      direct p50/p99 ms  relayed p50/p99 ms  added p50/p99 ms  CPU µs/req: direct  relayed (server+upstream / agent)');
  for (const c of STREAMS) {
    await load(c, Math.min(500, REQUESTS), viaDirect);
    await load(c, Math.min(500, REQUESTS), viaAgent);
    // Alternating rounds: a burst of other load on the machine hits both paths alike.
    const ds: Awaited<ReturnType<typeof load>>[] = [];
    const rs: typeof ds = [];
    for (let i = 0; i < ROUNDS; i++) {
      ds.push(await load(c, REQUESTS, viaDirect));
      rs.push(await load(c, REQUESTS, viaAgent, agent.pid));
    }
    const mid = (xs: typeof ds) => ({ rps: median(xs.map((x) => x.rps)), p50: median(xs.map((x) => x.p50)), p99: median(xs.map((x) => x.p99)), cpuUs: median(xs.map((x) => x.cpuUs)), agentCpuUs: median(xs.map((x) => x.agentCpuUs)) });
    const d = mid(ds);
    const r = mid(rs);
    const ratios = rs.map((x, i) => `${(x.rps / ds[i].rps * 100).toFixed(0)}`).join('/');
    console.log(`${String(c).padStart(7)}  ${d.rps.toFixed(0).padStart(12)}  ${r.rps.toFixed(0).padStart(13)}  ${`${(r.rps / d.rps * 100).toFixed(0)}% (${ratios})`.padStart(17)}  ${`${d.p50.toFixed(2)}/${d.p99.toFixed(2)}`.padStart(17)}  ${`${r.p50.toFixed(2)}/${r.p99.toFixed(2)}`.padStart(18)}  ${`${(r.p50 - d.p50).toFixed(2)}/${(r.p99 - d.p99).toFixed(2)}`.padStart(16)}  ${d.cpuUs.toFixed(0).padStart(18)}  ${`${r.cpuUs.toFixed(0)} / ${r.agentCpuUs.toFixed(0)}`.padStart(34)}`);
  }

  // Memory per idle session: the server's heap and RSS before and after SESSIONS agents connect.
  if (SESSIONS > 0) await idleSessions(server, cr.token);

  agent.kill('SIGKILL');
  direct.destroy();
  upstream.closeAllConnections();
  upstream.close();
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Connects SESSIONS idle agent sessions from a helper process and prints the server's memory per session. */
async function idleSessions(server: Awaited<ReturnType<typeof startServer>>, token: string) {
  const gc = (globalThis as { gc?: () => void }).gc;
  const settle = async () => { gc?.(); await new Promise((r) => setTimeout(r, 500)); gc?.(); return process.memoryUsage(); };
  const before = await settle();
  const swarm = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'agent-swarm.ts'), server.url, token, String(SESSIONS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const t0 = Date.now();
  await new Promise<void>((resolve) => swarm.stdout!.on('data', (c) => { if (String(c).includes('ready')) resolve(); }));
  const connectSecs = (Date.now() - t0) / 1000;
  const after = await settle();
  const kib = (n: number) => (n / 1024 / SESSIONS).toFixed(1);
  console.log(`\n${SESSIONS} idle sessions (held: ${server.gateway.sessionCount}), connected in ${connectSecs.toFixed(1)} s: server heap +${kib(after.heapUsed - before.heapUsed)} KiB/session, RSS +${kib(after.rss - before.rss)} KiB/session${gc ? '' : ' (run with --expose-gc for steadier heap figures)'}`);
  swarm.kill('SIGKILL');
}

await main();
