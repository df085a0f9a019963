// The ingress against bare Node, the two figures of issue 16 (requests per second, p50/p99):
//   1. an HTTPS edge with an http_response backend, against a bare node:https server that
//      answers the same body with the same certificate (target: at least 70%);
//   2. a route with ip_restriction, request_headers and a rate limit, through `edgeform agent`
//      to a local upstream, against the same requests sent to that upstream through a bare
//      Node reverse proxy (node:https in front of node:http; target: at least 50%).
// Each server under test is its own process pinned to one core (taskset, when there is one);
// the load comes from this process over keep-alive TLS connections.
// Usage: npm run bench:ingress [-- --requests 5000 --rounds 3 --concurrency 16 --cpu-prof DIR --only fixed|agent]
// (--only: measure one figure, the http_response one or the one through the agent)
// (--rounds: each figure is measured that many times, edgeform and its baseline in turn, and
// the medians are printed, so that a moment of load elsewhere on the machine moves one round,
// not the figure)
// (--cpu-prof: a V8 CPU profile of each server process, edgeform serve, the agent, the bare
// servers and the upstream, written to DIR/<role>/ when they stop; the serve profile covers
// both figures, the bench prints when each started)
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { Pki } from '../test/helpers/pki.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const REQUESTS = Number(arg('requests', '5000'));
const CONCURRENCY = Number(arg('concurrency', '16'));
const CPU_PROF = arg('cpu-prof', '');
const ONLY = arg('only', '');
const ROUNDS = Math.max(1, Number(arg('rounds', '3')));
const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const BODY = 'hello from the edge\n';
const HOST = 'app.example.com';
const SERVER_CORE = os.cpus().length - 1;
const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

// ---- roles this file plays in its child processes --------------------------------------

/** The roles this file plays exit on SIGTERM, so a --cpu-prof profile gets written. */
const exitOnTerm = () => process.once('SIGTERM', () => process.exit(0));

/** A bare node:https server answering BODY. */
function bareHttps(port: number, cert: string, key: string) {
  https.createServer({ cert, key, keepAliveTimeout: 60_000 }, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(BODY);
  }).listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
}

/** A bare Node reverse proxy: TLS in, node:http to the upstream with a keep-alive pool. */
function bareProxy(port: number, upstream: number, cert: string, key: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  https.createServer({ cert, key, keepAliveTimeout: 60_000 }, (req, res) => {
    const up = http.request({ host: '127.0.0.1', port: upstream, method: req.method, path: req.url, headers: { ...req.headers, 'x-forwarded-for': req.socket.remoteAddress ?? '' }, agent }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  }).listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
}

/** The local upstream both the agent and the bare proxy reach. */
function upstreamServer(port: number) {
  const s = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(BODY);
  });
  s.keepAliveTimeout = 60_000;
  s.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
}

// ---- the measuring side ------------------------------------------------------------------

const children: ChildProcess[] = [];

/**
 * A child process, pinned to the server core when possible; resolves when it prints `ready`.
 * With `logFile` its standard output goes to that file, as a deployment's log would: read
 * through a pipe, edgeform serve's access log (a line per request) made the load generator,
 * which also had to read it, slower during the edge's figures only.
 */
function start(args: string[], env: Record<string, string> = {}, ready = 'ready', core = SERVER_CORE, profileAs = '', logFile = ''): Promise<{ child: ChildProcess; out: () => string }> {
  const profile = CPU_PROF && profileAs ? ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', path.resolve(CPU_PROF, profileAs)] : [];
  const cmd = pinned ? 'taskset' : process.execPath;
  const full = pinned ? ['-c', String(core), process.execPath, ...profile, ...args] : [...profile, ...args];
  const fd = logFile ? fs.openSync(logFile, 'a') : undefined;
  const child = spawn(cmd, full, { env: { ...process.env, ...env }, stdio: ['ignore', fd ?? 'pipe', 'inherit'] });
  if (fd !== undefined) fs.closeSync(fd);
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let isReady = false;
    const seen = (text: string) => {
      out = text;
      if (isReady || !out.includes(ready)) return;
      isReady = true;
      resolve({ child, out: () => out });
    };
    if (logFile) {
      const poll = setInterval(() => {
        seen(fs.readFileSync(logFile, 'utf8'));
        if (isReady) clearInterval(poll);
      }, 50);
      child.on('exit', () => clearInterval(poll));
    } else {
      // Keeps reading (an unread pipe would stall the child) but stops collecting once ready.
      child.stdout!.on('data', (c) => { if (!isReady) seen(out + c); });
    }
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}:\n${out.slice(-2000)}`)));
  });
}
/** This file in another process playing `name`; the upstream shares core 0 with the load and the agent. */
const role = (name: string, ...rest: (string | number)[]) => start(['--import', 'tsx', fileURLToPath(import.meta.url), '--role', name, ...rest.map(String)], {}, 'ready', name === 'upstream' ? 0 : SERVER_CORE, name);

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** `total` GETs with `CONCURRENCY` in flight on keep-alive TLS connections; rps and p50/p99 (ms). */
async function load(port: number, ca: string, p: string, total: number) {
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca });
  const one = () => new Promise<void>((resolve, reject) => {
    https.get({ host: '127.0.0.1', port, path: p, servername: HOST, headers: { host: HOST }, agent }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode} on ${p}`));
      res.resume();
      res.on('end', resolve);
    }).on('error', reject);
  });
  const lat: number[] = [];
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next++ < total) {
      const t = process.hrtime.bigint();
      await one();
      lat.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  lat.sort((a, b) => a - b);
  return { rps: total / secs, p50: pct(lat, 50), p99: pct(lat, 99) };
}

/** When each measured run started and ended, in microseconds of the monotonic clock V8's profiles use. */
const phases: { name: string; from: number; to: number }[] = [];
const micros = () => Number(process.hrtime.bigint() / 1000n);

/**
 * CPU time (user + system, all threads) a process has used, in microseconds, from
 * /proc/PID/stat; undefined where there is none. Unlike requests per second it does not
 * depend on what else the machine runs, so per-request CPU compares runs on a busy machine.
 */
const TICK_US = 1e6 / (Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100);
function cpuMicros(pid: number | undefined): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_US;
  } catch {
    return undefined;
  }
}

/** Measures `p` at `port` after a warm-up; `busy` are the processes whose CPU per request is reported. */
async function measure(name: string, port: number, ca: string, p: string, busy: Record<string, ChildProcess>) {
  await load(port, ca, p, Math.min(1000, REQUESTS));
  const before = Object.values(busy).map((c) => cpuMicros(c.pid));
  const from = micros();
  const own = process.cpuUsage();
  const r = await load(port, ca, p, REQUESTS);
  const used = process.cpuUsage(own);
  phases.push({ name, from, to: micros() });
  const cpu = Object.keys(busy).map((k, i) => {
    const a = before[i], b = cpuMicros(busy[k].pid);
    return a === undefined || b === undefined ? undefined : { name: k, us: (b - a) / REQUESTS };
  });
  return { ...r, cpu: cpu.every((c) => c) ? cpu as { name: string; us: number }[] : undefined, loadUs: (used.user + used.system) / REQUESTS };
}

async function main() {
  const pki = new Pki();
  const caCert = pki.issue('p256', { subject: [['CN', 'bench CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
  const leaf = pki.issue('p256', { subject: [['CN', HOST]], sans: [`DNS:${HOST}`], ca: false, extendedKeyUsage: ['serverAuth'] }, caCert);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-ingress-'));
  const files = { cert: path.join(dir, 'cert.pem'), key: path.join(dir, 'key.pem') };
  fs.writeFileSync(files.cert, leaf.cert);
  fs.writeFileSync(files.key, leaf.key);

  const upstream = await freePort();
  const upstreamProc = await role('upstream', upstream);

  // The edge: edgeform serve on one core, the agent on the other.
  const ingressPort = await freePort();
  const serve = await start([BIN, 'serve', '--port', '0', '--data-dir', dir, '--api-rate-limit', '0', '--workers', '1', '--ingress', `443=127.0.0.1:${ingressPort}`], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN }, 'listening', SERVER_CORE, 'serve', path.join(dir, 'serve.log'));
  const apiUrl = serve.out().match(/"url":"(http:[^"]+)"/)?.[1];
  if (!apiUrl) throw new Error(`edgeform serve printed no URL:\n${serve.out()}`);
  const api = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(`${apiUrl}${p}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
    return r.json() as Promise<any>;
  };
  await api('POST', '/tls_certificates', { certificate_pem: leaf.cert + caCert.cert, private_key_pem: leaf.key });
  const manifest = path.join(dir, 'bench.yaml');
  const policy = stringify({ on_http_request: [{ actions: [{ type: 'rate-limit', config: { name: 'bench', algorithm: 'sliding_window', capacity: 2_000_000_000, rate: '60s', bucket_key: ['conn.client_ip'] } }] }] });
  fs.writeFileSync(manifest, [
    { kind: 'IPPolicy', name: 'loopback', rules: [{ cidr: '127.0.0.0/8', action: 'allow' }] },
    { kind: 'HTTPResponseBackend', name: 'hello', body: BODY, status_code: 200, headers: { 'content-type': 'text/plain' } },
    { kind: 'TunnelGroupBackend', name: 'web', labels: { app: 'bench' } },
    {
      kind: 'HTTPSEdge',
      name: 'bench',
      hostports: [`${HOST}:443`],
      routes: [
        { match_type: 'exact_path', match: '/fixed', backend: { backend_id: 'HTTPResponseBackend/hello' } },
        {
          match_type: 'exact_path',
          match: '/agent',
          backend: { backend_id: 'TunnelGroupBackend/web' },
          ip_restriction: { ip_policy_ids: ['IPPolicy/loopback'] },
          request_headers: { add: { 'x-bench': 'edge' }, remove: ['x-debug'] },
          traffic_policy: { value: policy },
        },
      ],
    },
  ].map((d) => stringify(d)).join('---\n'));
  const applied = spawnSync(process.execPath, [BIN, 'apply', '-f', manifest, '--auto-approve'], { env: { ...process.env, EDGEFORM_API_URL: apiUrl, EDGEFORM_API_KEY: TOKEN }, encoding: 'utf8' });
  if (applied.status !== 0) throw new Error(`apply failed:\n${applied.stdout}\n${applied.stderr}`);
  const cred = await api('POST', '/credentials', {});
  const agent = await start([BIN, 'agent', '--api-url', apiUrl, '--authtoken', cred.token, '--label', 'app=bench', '--forwards-to', `127.0.0.1:${upstream}`], {}, 'online: tn_', 0, 'agent');

  const bare = await freePort();
  const bareHttpsProc = await role('bare-https', bare, files.cert, files.key);
  const proxy = await freePort();
  const bareProxyProc = await role('bare-proxy', proxy, upstream, files.cert, files.key);

  const machine = `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${os.type()} ${os.release()}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`;
  console.log(`machine: ${machine}`);
  console.log(`servers under test ${pinned ? `pinned to core ${SERVER_CORE} (taskset)` : 'not pinned (no taskset)'}; ${REQUESTS} GETs per measurement at ${CONCURRENCY} in flight over keep-alive TLS 1.3, ${BODY.length}-byte body, warm-up excluded; ${ROUNDS} rounds of edgeform then its baseline, medians\n`);
  // The same ratio from CPU per request (bare over edge), which a busy machine disturbs less.
  const cpuSum = (r: { cpu?: { name: string; us: number }[] }, names?: string[]) => r.cpu?.filter((c) => !names || names.includes(c.name)).reduce((a, c) => a + c.us, 0);
  const cpuRatio = (bare: { cpu?: { name: string; us: number }[] }, edge: { cpu?: { name: string; us: number }[] }, edgeNames: string[], bareNames?: string[]) => {
    const b = cpuSum(bare, bareNames), e = cpuSum(edge, edgeNames);
    return b && e ? `; by CPU per request ${(b / e * 100).toFixed(0)}% (${bareNames?.join('+') ?? 'bare'} over ${edgeNames.join('+')})` : '';
  };
  const cpuText = (r: { cpu?: { name: string; us: number }[]; loadUs: number }) => `${r.cpu ? `   CPU/request ${r.cpu.map((c) => `${c.name} ${c.us.toFixed(0)} µs`).join(' + ')}` : ''} (load generator ${r.loadUs.toFixed(0)} µs)`;
  const row = (name: string, r: { rps: number; p50: number; p99: number; cpu?: { name: string; us: number }[]; loadUs: number }) => `${name.padEnd(44)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${r.p50.toFixed(2).padStart(6)} ms   p99 ${r.p99.toFixed(2).padStart(6)} ms${cpuText(r)}`;
  /** ROUNDS of edgeform then its baseline, in turn; the medians of each, and each round's ratio. */
  type Measured = Awaited<ReturnType<typeof measure>>;
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const medianOf = (runs: Measured[]): Measured => ({
    rps: med(runs.map((r) => r.rps)), p50: med(runs.map((r) => r.p50)), p99: med(runs.map((r) => r.p99)), loadUs: med(runs.map((r) => r.loadUs)),
    cpu: runs.every((r) => r.cpu) ? runs[0].cpu!.map((c, i) => ({ name: c.name, us: med(runs.map((r) => r.cpu![i].us)) })) : undefined,
  });
  async function alternate(edge: () => Promise<Measured>, base: () => Promise<Measured>) {
    const e: Measured[] = [], b: Measured[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      e.push(await edge());
      b.push(await base());
    }
    const rounds = e.map((x, i) => `${(x.rps / b[i].rps * 100).toFixed(0)}%`).join(', ');
    return { edge: medianOf(e), base: medianOf(b), rounds };
  }
  if (ONLY !== 'agent') {
    const fixed = await alternate(
      () => measure('edge-fixed', ingressPort, caCert.cert, '/fixed', { serve: serve.child }),
      () => measure('bare-https', bare, caCert.cert, '/', { 'node:https': bareHttpsProc.child }),
    );
    console.log(row('edge, http_response backend', fixed.edge));
    console.log(row('bare node:https, same body', fixed.base));
    console.log(`  ratio ${(fixed.edge.rps / fixed.base.rps * 100).toFixed(0)}% of the medians (target at least 70%; rounds: ${fixed.rounds})${cpuRatio(fixed.base, fixed.edge, ['serve'])}\n`);
  }
  if (ONLY !== 'fixed') await agentFigure();
  async function agentFigure() {
    const relayed = await alternate(
      () => measure('edge-agent', ingressPort, caCert.cert, '/agent', { serve: serve.child, agent: agent.child, upstream: upstreamProc.child }),
      () => measure('bare-proxy', proxy, caCert.cert, '/', { proxy: bareProxyProc.child, upstream: upstreamProc.child }),
    );
    console.log(row('edge, ip+headers+rate limit, edgeform agent', relayed.edge));
    console.log(row('bare Node reverse proxy, same upstream', relayed.base));
    console.log(`  ratio ${(relayed.edge.rps / relayed.base.rps * 100).toFixed(0)}% of the medians (target at least 50%; rounds: ${relayed.rounds})${cpuRatio(relayed.base, relayed.edge, ['serve', 'agent'], ['proxy'])}`);
  }
  console.log(`load average at the end: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  // The edge's figures include its access log: a line per request, to a file.
  const logged = fs.readFileSync(path.join(dir, 'serve.log'), 'utf8').split('"msg":"ingress request"').length - 1;
  console.log(`access log of edgeform serve: ${logged} lines (to a file)`);
  if (CPU_PROF) {
    // SIGTERM, not SIGKILL: a profile is written when its process exits on its own.
    await Promise.all(children.map((c) => new Promise((r) => { c.once('exit', r); c.kill('SIGTERM'); })));
    fs.writeFileSync(path.resolve(CPU_PROF, 'phases.json'), `${JSON.stringify(phases, null, 1)}\n`);
    console.log(`\nCPU profiles in ${path.resolve(CPU_PROF)}/<process>/, the measured runs' times in phases.json`);
  }
  pki.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

const roleAt = process.argv.indexOf('--role');
if (roleAt > 0) {
  const [name, ...rest] = process.argv.slice(roleAt + 1);
  const read = (f: string) => fs.readFileSync(f, 'utf8');
  exitOnTerm();
  if (name === 'upstream') upstreamServer(Number(rest[0]));
  else if (name === 'bare-https') bareHttps(Number(rest[0]), read(rest[1]), read(rest[2]));
  else if (name === 'bare-proxy') bareProxy(Number(rest[0]), Number(rest[1]), read(rest[2]), read(rest[3]));
} else {
  try {
    await main();
  } finally {
    for (const c of children) c.kill('SIGKILL');
  }
}
