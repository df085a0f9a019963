// edgeform against nginx, core for core (issue 34): over TLS with keep-alive,
//   1. an HTTPS edge answering from an `http_response` backend vs nginx `return 200`;
//      (with one worker also bare node:https on the same core: what Node itself costs, the
//      floor under any Node server);
//   2. a route through `edgeform agent` to a local upstream vs nginx `proxy_pass` to the same
//      upstream (a keep-alive upstream pool on both sides);
// each with 1 worker and with every core (`edgeform serve --workers W` beside nginx
// `worker_processes W`), the servers pinned with taskset to the same W cores, in alternating
// rounds (each round: for each worker count, edgeform then nginx; every server is started
// before the first round), medians printed with each round's ratio.
//
// It installs nothing: it uses Debian's nginx (`apt-get install -y nginx`) and, when present,
// wrk (`apt-get install -y wrk`) as the load generator; without wrk it falls back to a Node
// load generator in this process (one core, which then limits nginx more than edgeform).
// nginx is configured here, in a temporary folder (its own pid file, logs and temp paths).
//
// Usage: npx tsx bench/cores.ts [--cores N] [--workers 1,N] [--seconds 10] [--rounds 3]
//        [--connections 64] [--only fixed|agent] [--load node] [--cpu-prof DIR]
//   --cores N     use cores 0..N-1 of this machine (default: os.availableParallelism()); a
//                 server with W workers is pinned to the last W of them, the load generator,
//                 the agent and the upstream to the others (core 0 when the servers take all)
//   --workers     the worker counts to measure (default `1,N`)
//   --cpu-prof    a V8 CPU profile of each edgeform process (serve, its workers, the agent)
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
const CORES = Math.max(1, Number(arg('cores', String(os.availableParallelism()))));
const WORKERS = [...new Set(arg('workers', `1,${CORES}`).split(',').map(Number))].filter((w) => w >= 1 && w <= CORES);
const SECONDS = Number(arg('seconds', '10'));
const ROUNDS = Math.max(1, Number(arg('rounds', '3')));
const CONNECTIONS = Number(arg('connections', '64'));
const ONLY = arg('only', '');
const CPU_PROF = arg('cpu-prof', '');
const NODE_LOAD = arg('load', '') === 'node';
const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const BODY = 'hello from the edge\n';
// `localhost`: a name wrk can both resolve and send as SNI (wrk takes SNI from the URL).
const HOST = 'localhost';
const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
const which = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).stdout.trim();
const NGINX = which('nginx') || (fs.existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : '');
const WRK = NODE_LOAD ? '' : which('wrk');

/** The cores a server with `w` workers is pinned to, and the ones left for the load. */
const serverCores = (w: number) => Array.from({ length: w }, (_, i) => CORES - w + i);
const loadCores = (w: number) => (CORES - w > 0 ? Array.from({ length: CORES - w }, (_, i) => i) : [0]);

// ---- roles this file plays in its child processes --------------------------------------

/** The local upstream both the agent and nginx's proxy_pass reach. */
function upstreamServer(port: number) {
  const s = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(BODY);
  });
  s.keepAliveTimeout = 60_000;
  s.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
}

/** A bare node:https server answering BODY: what Node itself costs per request (the floor under edgeform). */
function bareHttps(port: number, cert: string, key: string) {
  https.createServer({ cert, key, keepAliveTimeout: 60_000 }, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(BODY);
  }).listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
}

// ---- the measuring side ------------------------------------------------------------------

const children: ChildProcess[] = [];

/** A child process pinned to `cores`; resolves when its output (or `logFile`) shows `ready`. */
function start(cmd: string, args: string[], o: { env?: Record<string, string>; ready: string; cores: number[]; logFile?: string; profileAs?: string }): Promise<{ child: ChildProcess; out: () => string }> {
  const profile = CPU_PROF && o.profileAs ? ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', path.resolve(CPU_PROF, o.profileAs)] : [];
  const argv = cmd === process.execPath ? [...profile, ...args] : args;
  const full = pinned ? ['-c', o.cores.join(','), cmd, ...argv] : argv;
  const fd = o.logFile ? fs.openSync(o.logFile, 'a') : undefined;
  const child = spawn(pinned ? 'taskset' : cmd, full, { env: { ...process.env, ...o.env }, stdio: ['ignore', fd ?? 'pipe', 'inherit'] });
  if (fd !== undefined) fs.closeSync(fd);
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let isReady = false;
    const seen = (text: string) => {
      out = text;
      if (isReady || !out.includes(o.ready)) return;
      isReady = true;
      resolve({ child, out: () => out });
    };
    if (o.logFile) {
      const poll = setInterval(() => {
        seen(fs.readFileSync(o.logFile!, 'utf8'));
        if (isReady) clearInterval(poll);
      }, 50);
      child.on('exit', () => clearInterval(poll));
    } else {
      child.stdout!.on('data', (c) => { if (!isReady) seen(out + c); });
    }
    child.on('exit', (code) => { if (!isReady) reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${out.slice(-2000)}`)); });
  });
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

async function waitForPort(port: number, deadlineMs = 10_000) {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const ok = await new Promise<boolean>((r) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); r(true); }).on('error', () => r(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing listens on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Measured { rps: number; p50: number; p99: number; requests: number; cpuUs?: number }

/**
 * CPU time (user + system) of a process and every process under it (cluster workers, nginx's
 * workers), in microseconds, from /proc; undefined where there is none. Unlike requests per
 * second it does not depend on what else the machine runs.
 */
const TICK_US = 1e6 / (Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100);
function cpuTree(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    let us = (Number(f[11]) + Number(f[12])) * TICK_US;
    for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
      for (const c of fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) us += cpuTree(Number(c)) ?? 0;
    }
    return us;
  } catch {
    return undefined;
  }
}
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** wrk's latency ("1.23ms", "850.00us", "1.02s") in ms. */
function wrkMs(v: string): number {
  const m = v.match(/^([\d.]+)(us|ms|s|m)$/);
  if (!m) throw new Error(`wrk latency ${v}`);
  return Number(m[1]) * ({ us: 0.001, ms: 1, s: 1000, m: 60_000 } as Record<string, number>)[m[2]];
}

/** `seconds` of GETs at CONNECTIONS keep-alive TLS connections from wrk pinned to `cores`. */
function wrk(port: number, p: string, seconds: number, cores: number[]): Measured {
  const args = ['-t', String(cores.length), '-c', String(CONNECTIONS), '-d', `${seconds}s`, '--timeout', '10s', '--latency', '-H', `Host: ${HOST}`, `https://${HOST}:${port}${p}`];
  const r = spawnSync(pinned ? 'taskset' : WRK, pinned ? ['-c', cores.join(','), WRK, ...args] : args, { encoding: 'utf8' });
  const out = r.stdout;
  const rps = Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1]);
  const p50 = out.match(/^\s+50%\s+(\S+)/m)?.[1];
  const p99 = out.match(/^\s+99%\s+(\S+)/m)?.[1];
  const bad = out.match(/Non-2xx or 3xx responses: (\d+)/)?.[1];
  const errors = out.match(/Socket errors: (.*)/)?.[1];
  if (r.status !== 0 || !rps || !p50 || !p99 || bad) throw new Error(`wrk on ${port}${p}: ${bad ? `${bad} non-2xx answers` : 'no figures'}\n${out}${r.stderr}`);
  if (errors) console.log(`  (wrk on ${port}${p}: socket errors ${errors})`);
  return { rps, p50: wrkMs(p50), p99: wrkMs(p99), requests: Number(out.match(/(\d+) requests in/)?.[1]) };
}

/** The fallback load generator: this process, CONNECTIONS requests in flight for `seconds`. */
async function nodeLoad(port: number, ca: string, p: string, seconds: number): Promise<Measured> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONNECTIONS, ca });
  const one = () => new Promise<void>((resolve, reject) => {
    https.get({ host: '127.0.0.1', port, path: p, servername: HOST, headers: { host: HOST }, agent }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode} on ${p}`));
      res.resume();
      res.on('end', resolve);
    }).on('error', reject);
  });
  const lat: number[] = [];
  const t0 = process.hrtime.bigint();
  const until = Date.now() + seconds * 1000;
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (Date.now() < until) {
      const t = process.hrtime.bigint();
      await one();
      lat.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  lat.sort((a, b) => a - b);
  return { rps: lat.length / secs, p50: pct(lat, 50), p99: pct(lat, 99), requests: lat.length };
}

/** One measurement after a short warm-up; `busy`: the processes (with theirs) whose CPU per request is reported. */
async function measure(port: number, ca: string, p: string, w: number, busy: ChildProcess[]): Promise<Measured> {
  const warm = Math.max(2, Math.min(5, SECONDS / 3));
  // A warm-up that got nothing through (a starved machine) is not a figure: the measurement says.
  try {
    if (WRK) wrk(port, p, warm, loadCores(w));
    else await nodeLoad(port, ca, p, warm);
  } catch { /* measured below */ }
  const before = busy.map((c) => cpuTree(c.pid));
  const r = WRK ? wrk(port, p, SECONDS, loadCores(w)) : await nodeLoad(port, ca, p, SECONDS);
  const after = busy.map((c) => cpuTree(c.pid));
  const used = before.every((b, i) => b !== undefined && after[i] !== undefined) ? after.reduce((a: number, x, i) => a + x! - before[i]!, 0) : undefined;
  return { ...r, cpuUs: used === undefined ? undefined : used / r.requests };
}

/** nginx configured in `dir`: `worker_processes w`, TLS on `port`, `return 200` and `proxy_pass` to the upstream. */
async function startNginx(dir: string, port: number, upstream: number, w: number, cert: string, key: string) {
  const conf = path.join(dir, 'nginx.conf');
  for (const t of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(dir, `${t}_temp`), { recursive: true });
  fs.writeFileSync(conf, `
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes ${w};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/client_body_temp;
  proxy_temp_path ${dir}/proxy_temp;
  fastcgi_temp_path ${dir}/fastcgi_temp;
  uwsgi_temp_path ${dir}/uwsgi_temp;
  scgi_temp_path ${dir}/scgi_temp;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  upstream up { server 127.0.0.1:${upstream}; keepalive 64; }
  server {
    listen 127.0.0.1:${port} ssl;
    server_name ${HOST};
    ssl_certificate ${cert};
    ssl_certificate_key ${key};
    location = /fixed { default_type text/plain; return 200 "${BODY.replace('\n', '\\n')}"; }
    location = /agent {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $remote_addr;
    }
  }
}
`);
  const child = spawn(pinned ? 'taskset' : NGINX, [...(pinned ? ['-c', serverCores(w).join(','), NGINX] : []), '-p', dir, '-c', conf, '-e', path.join(dir, 'error.log')], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  await waitForPort(port);
  return child;
}

/** edgeform serve with `w` workers, the two routes applied, `edgeform agent` online. */
async function startEdgeform(dir: string, port: number, upstream: number, w: number, leaf: { cert: string; key: string }, caCert: string) {
  const serve = await start(process.execPath, [BIN, 'serve', '--port', '0', '--data-dir', dir, '--api-rate-limit', '0', ...(WORKERS_FLAG ? ['--workers', String(w)] : []), '--ingress', `443=127.0.0.1:${port}`], {
    env: { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN }, ready: 'listening', cores: serverCores(w), logFile: path.join(dir, 'serve.log'), profileAs: `serve-w${w}`,
  });
  const apiUrl = serve.out().match(/"url":"(http:[^"]+)"/)?.[1];
  if (!apiUrl) throw new Error(`edgeform serve printed no URL:\n${serve.out()}`);
  const api = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(`${apiUrl}${p}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
    return r.json() as Promise<any>;
  };
  await api('POST', '/tls_certificates', { certificate_pem: leaf.cert + caCert, private_key_pem: leaf.key });
  const manifest = path.join(dir, 'bench.yaml');
  fs.writeFileSync(manifest, [
    { kind: 'HTTPResponseBackend', name: 'hello', body: BODY, status_code: 200, headers: { 'content-type': 'text/plain' } },
    { kind: 'TunnelGroupBackend', name: 'web', labels: { app: 'bench' } },
    {
      kind: 'HTTPSEdge',
      name: 'bench',
      hostports: [`${HOST}:443`],
      routes: [
        { match_type: 'exact_path', match: '/fixed', backend: { backend_id: 'HTTPResponseBackend/hello' } },
        { match_type: 'exact_path', match: '/agent', backend: { backend_id: 'TunnelGroupBackend/web' } },
      ],
    },
  ].map((d) => stringify(d)).join('---\n'));
  const applied = spawnSync(process.execPath, [BIN, 'apply', '-f', manifest, '--auto-approve'], { env: { ...process.env, EDGEFORM_API_URL: apiUrl, EDGEFORM_API_KEY: TOKEN }, encoding: 'utf8' });
  if (applied.status !== 0) throw new Error(`apply failed:\n${applied.stdout}\n${applied.stderr}`);
  const cred = await api('POST', '/credentials', {});
  const agent = await start(process.execPath, [BIN, 'agent', '--api-url', apiUrl, '--authtoken', cred.token, '--label', 'app=bench', '--forwards-to', `127.0.0.1:${upstream}`], {
    ready: 'online: tn_', cores: loadCores(w), profileAs: `agent-w${w}`,
  });
  return { serve: serve.child, agent: agent.child };
}

/** SIGTERM, then the exit (a --cpu-prof profile is written when its process exits on its own). */
const stop = (c: ChildProcess) => new Promise((r) => {
  if (c.exitCode !== null || c.signalCode !== null) return r(undefined);
  c.once('exit', r);
  c.kill('SIGTERM');
});

const WORKERS_FLAG = spawnSync(process.execPath, [BIN, 'serve', '--help'], { encoding: 'utf8' }).stdout.includes('--workers');
const supportsWorkers = () => WORKERS_FLAG;

async function main() {
  if (!NGINX) {
    console.error('\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
      + '!!  nginx is not installed: this bench compares edgeform with nginx and measures  !!\n'
      + '!!  nothing without it. Install Debian\'s: apt-get install -y nginx (and wrk).     !!\n'
      + '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n');
    process.exitCode = 1;
    return;
  }
  if (!supportsWorkers() && WORKERS.some((w) => w > 1)) console.log('!! this edgeform has no --workers: only 1 worker is measured\n');
  const workers = supportsWorkers() ? WORKERS : [1];
  const pki = new Pki();
  const caCert = pki.issue('p256', { subject: [['CN', 'bench CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
  const leaf = pki.issue('p256', { subject: [['CN', HOST]], sans: [`DNS:${HOST}`], ca: false, extendedKeyUsage: ['serverAuth'] }, caCert);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-cores-'));
  const files = { cert: path.join(dir, 'cert.pem'), key: path.join(dir, 'key.pem') };
  fs.writeFileSync(files.cert, leaf.cert);
  fs.writeFileSync(files.key, leaf.key);
  const nginxVersion = spawnSync(NGINX, ['-v'], { encoding: 'utf8' }).stderr.trim();

  const upstream = await freePort();
  await start(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--role', 'upstream', String(upstream)], { ready: 'ready', cores: loadCores(Math.max(...workers)) });

  const machine = `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.availableParallelism()} cores available (using ${CORES}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${nginxVersion}, ${os.type()} ${os.release()}`;
  console.log(`machine: ${machine}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`load generator: ${WRK ? `wrk (${WRK})` : 'Node in this process (no wrk: apt-get install -y wrk)'}, ${CONNECTIONS} keep-alive TLS connections, ${SECONDS} s per measurement after a warm-up; ${ROUNDS} rounds of edgeform then nginx; servers ${pinned ? 'pinned with taskset' : 'NOT pinned (no taskset)'}\n`);
  const row = (name: string, r: Measured) => `  ${name.padEnd(40)} ${r.rps.toFixed(0).padStart(8)} req/s   p50 ${r.p50.toFixed(2).padStart(7)} ms   p99 ${r.p99.toFixed(2).padStart(7)} ms${r.cpuUs ? `   CPU/request ${r.cpuUs.toFixed(0)} µs` : ''}`;
  const results: Record<string, { edge: Measured; nginx: Measured }> = {};

  // Every worker count's servers start first, then each round measures them all in turn (edgeform
  // then nginx, for each worker count): the machine's load drifts, and a figure of 2 workers
  // taken minutes after the figure of 1 would say as much about the drift as about the workers.
  const setups: { w: number; wdir: string; edgePort: number; nginxPort: number; barePort: number; edge: { serve: ChildProcess; agent: ChildProcess }; ngx: ChildProcess; bare?: { child: ChildProcess } }[] = [];
  for (const w of workers) {
    const wdir = path.join(dir, `w${w}`);
    fs.mkdirSync(wdir);
    const edgePort = await freePort();
    const nginxPort = await freePort();
    const edge = await startEdgeform(wdir, edgePort, upstream, w, leaf, caCert.cert);
    const ngx = await startNginx(path.join(wdir, 'nginx'), nginxPort, upstream, w, files.cert, files.key);
    // With one worker, bare node:https on the same core: the most a Node server can be.
    const barePort = w === 1 ? await freePort() : 0;
    const bare = w === 1 ? await start(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--role', 'bare-https', String(barePort), files.cert, files.key], { ready: 'ready', cores: serverCores(1) }) : undefined;
    console.log(`${w} worker${w > 1 ? 's' : ''}: servers on core${w > 1 ? 's' : ''} ${serverCores(w).join(',')}; load generator, agent and upstream on ${loadCores(w).join(',')}${serverCores(w).includes(loadCores(w)[0]) ? ' (sharing the servers\' cores)' : ''}`);
    if (process.env.BENCH_PAUSE) console.log(`  edgeform on ${edgePort} (${wdir}), nginx on ${nginxPort}`);
    setups.push({ w, wdir, edgePort, nginxPort, barePort, edge, ngx, bare });
  }
  console.log('');
  if (process.env.BENCH_PAUSE) {
    console.log(`paused for ${process.env.BENCH_PAUSE} s`);
    await new Promise((r) => setTimeout(r, Number(process.env.BENCH_PAUSE) * 1000));
  }
  const figures: [string, string, string][] = [];
  if (ONLY !== 'agent') figures.push(['fixed', 'edge, http_response backend', 'nginx return 200']);
  if (ONLY !== 'fixed') figures.push(['agent', 'edge, edgeform agent to the upstream', 'nginx proxy_pass to the upstream']);
  const m = (xs: Measured[]): Measured => ({ rps: med(xs.map((x) => x.rps)), p50: med(xs.map((x) => x.p50)), p99: med(xs.map((x) => x.p99)), requests: med(xs.map((x) => x.requests)), cpuUs: xs.every((x) => x.cpuUs !== undefined) ? med(xs.map((x) => x.cpuUs!)) : undefined });
  for (const [p, edgeName, nginxName] of figures) {
    const e = new Map<number, Measured[]>(), n = new Map<number, Measured[]>(), b: Measured[] = [];
    for (const s of setups) {
      e.set(s.w, []);
      n.set(s.w, []);
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (const s of setups) {
        try {
          e.get(s.w)!.push(await measure(s.edgePort, caCert.cert, `/${p}`, s.w, p === 'agent' ? [s.edge.serve, s.edge.agent] : [s.edge.serve]));
        } catch (err) {
          // What edgeform logged last says why a measurement failed.
          console.error(fs.readFileSync(path.join(s.wdir, 'serve.log'), 'utf8').split('\n').filter((l) => !l.includes('"ingress request"')).slice(-15).join('\n'));
          throw err;
        }
        n.get(s.w)!.push(await measure(s.nginxPort, caCert.cert, `/${p}`, s.w, [s.ngx]));
        if (s.bare && p === 'fixed') b.push(await measure(s.barePort, caCert.cert, '/', s.w, [s.bare.child]));
      }
    }
    for (const s of setups) {
      const es = e.get(s.w)!, ns = n.get(s.w)!;
      const em = m(es), nm = m(ns);
      results[`${p}@${s.w}`] = { edge: em, nginx: nm };
      const target = p === 'fixed' ? 0.8 : 0.5;
      console.log(`${s.w} worker${s.w > 1 ? 's' : ''}:`);
      console.log(row(edgeName, em));
      console.log(row(nginxName, nm));
      if (s.bare && b.length) {
        const bm = m(b);
        console.log(row('bare node:https (Node\'s own floor)', bm));
        console.log(`    bare node:https/nginx ${(bm.rps / nm.rps).toFixed(2)}${bm.cpuUs && nm.cpuUs ? ` (by CPU per request ${(nm.cpuUs / bm.cpuUs).toFixed(2)})` : ''}; edgeform/bare node:https ${(em.rps / bm.rps).toFixed(2)}${bm.cpuUs && em.cpuUs ? ` (by CPU per request ${(bm.cpuUs / em.cpuUs).toFixed(2)})` : ''}`);
      }
      console.log(`    edgeform/nginx ${(em.rps / nm.rps).toFixed(2)} of the medians (target at least ${target}; rounds ${es.map((x, i) => (x.rps / ns[i].rps).toFixed(2)).join(', ')})${em.cpuUs && nm.cpuUs ? `; by CPU per request ${(nm.cpuUs / em.cpuUs).toFixed(2)}` : ''}`);
    }
    if (setups.length > 1) {
      const [lo, hi] = [setups[0], setups[setups.length - 1]];
      const el = e.get(lo.w)!, eh = e.get(hi.w)!;
      console.log(`    edgeform ${hi.w} workers over ${lo.w}, round by round: ${eh.map((x, i) => (x.rps / el[i].rps).toFixed(2)).join(', ')}`);
    }
    console.log('');
  }
  await Promise.all(setups.flatMap((s) => [stop(s.edge.serve), stop(s.edge.agent), stop(s.ngx), ...(s.bare ? [stop(s.bare.child)] : [])]));
  if (workers.length > 1) {
    const [lo, hi] = [workers[0], workers[workers.length - 1]];
    for (const p of ['fixed', 'agent']) {
      const a = results[`${p}@${lo}`], b = results[`${p}@${hi}`];
      if (a && b) console.log(`${p}: ${hi} workers over ${lo}: edgeform ${(b.edge.rps / a.edge.rps).toFixed(2)}x, nginx ${(b.nginx.rps / a.nginx.rps).toFixed(2)}x (target for edgeform: at least ${(0.8 * hi / lo).toFixed(1)}x)`);
    }
  }
  console.log(`load average at the end: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  pki.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

const roleAt = process.argv.indexOf('--role');
if (roleAt > 0) {
  process.once('SIGTERM', () => process.exit(0));
  const [name, ...rest] = process.argv.slice(roleAt + 1);
  if (name === 'upstream') upstreamServer(Number(rest[0]));
  else if (name === 'bare-https') bareHttps(Number(rest[0]), fs.readFileSync(rest[1], 'utf8'), fs.readFileSync(rest[2], 'utf8'));
} else {
  try {
    await main();
  } finally {
    await Promise.all(children.map(stop));
  }
}
