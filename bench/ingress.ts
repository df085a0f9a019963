// The ingress against bare Node, the two figures of issue 16 (requests per second, p50/p99):
//   1. an HTTPS edge with an http_response backend, against a bare node:https server that
//      answers the same body with the same certificate (target: at least 70%);
//   2. a route with ip_restriction, request_headers and a rate limit, through `edgeform agent`
//      to a local upstream, against the same requests sent to that upstream through a bare
//      Node reverse proxy (node:https in front of node:http; target: at least 50%).
// Each server under test is its own process pinned to one core (taskset, when there is one);
// the load comes from this process over keep-alive TLS connections.
// Usage: npm run bench:ingress [-- --requests 5000 --concurrency 16 --cpu-prof DIR]
// (--cpu-prof: a V8 CPU profile of the edgeform serve process, written to DIR when it stops)
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
const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const BODY = 'hello from the edge\n';
const HOST = 'app.example.com';
const SERVER_CORE = os.cpus().length - 1;
const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

// ---- roles this file plays in its child processes --------------------------------------

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

/** A child process, pinned to the server core when possible; resolves when it prints `ready`. */
function start(args: string[], env: Record<string, string> = {}, ready = 'ready', core = SERVER_CORE): Promise<{ child: ChildProcess; out: () => string }> {
  const cmd = pinned ? 'taskset' : process.execPath;
  const full = pinned ? ['-c', String(core), process.execPath, ...args] : args;
  const child = spawn(cmd, full, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let isReady = false;
    // Keeps reading (an unread pipe would stall the access log) but stops collecting once ready.
    child.stdout!.on('data', (c) => {
      if (isReady) return;
      out += c;
      if (out.includes(ready)) {
        isReady = true;
        resolve({ child, out: () => out });
      }
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}:\n${out.slice(-2000)}`)));
  });
}
/** This file in another process playing `name`; the upstream shares core 0 with the load and the agent. */
const role = (name: string, ...rest: (string | number)[]) => start(['--import', 'tsx', fileURLToPath(import.meta.url), '--role', name, ...rest.map(String)], {}, 'ready', name === 'upstream' ? 0 : SERVER_CORE);

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

async function measure(port: number, ca: string, p: string) {
  await load(port, ca, p, Math.min(1000, REQUESTS));
  return load(port, ca, p, REQUESTS);
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
  await role('upstream', upstream);

  // The edge: edgeform serve on one core, the agent on the other.
  const ingressPort = await freePort();
  const profile = CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(CPU_PROF)] : [];
  const serve = await start([...profile, BIN, 'serve', '--port', '0', '--data-dir', dir, '--api-rate-limit', '0', '--ingress', `443=127.0.0.1:${ingressPort}`], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN }, 'listening');
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
  await start([BIN, 'agent', '--api-url', apiUrl, '--authtoken', cred.token, '--label', 'app=bench', '--forwards-to', `127.0.0.1:${upstream}`], {}, 'online: tn_', 0);

  const bare = await freePort();
  await role('bare-https', bare, files.cert, files.key);
  const proxy = await freePort();
  await role('bare-proxy', proxy, upstream, files.cert, files.key);

  const machine = `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${os.type()} ${os.release()}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`;
  console.log(`machine: ${machine}`);
  console.log(`servers under test ${pinned ? `pinned to core ${SERVER_CORE} (taskset)` : 'not pinned (no taskset)'}; ${REQUESTS} GETs per figure at ${CONCURRENCY} in flight over keep-alive TLS 1.3, ${BODY.length}-byte body, warm-up excluded\n`);
  const row = (name: string, r: { rps: number; p50: number; p99: number }) => `${name.padEnd(44)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${r.p50.toFixed(2).padStart(6)} ms   p99 ${r.p99.toFixed(2).padStart(6)} ms`;
  const fixedEdge = await measure(ingressPort, caCert.cert, '/fixed');
  const fixedBare = await measure(bare, caCert.cert, '/');
  console.log(row('edge, http_response backend', fixedEdge));
  console.log(row('bare node:https, same body', fixedBare));
  console.log(`  ratio ${(fixedEdge.rps / fixedBare.rps * 100).toFixed(0)}% (target at least 70%)\n`);
  const viaAgent = await measure(ingressPort, caCert.cert, '/agent');
  const viaProxy = await measure(proxy, caCert.cert, '/');
  console.log(row('edge, ip+headers+rate limit, edgeform agent', viaAgent));
  console.log(row('bare Node reverse proxy, same upstream', viaProxy));
  console.log(`  ratio ${(viaAgent.rps / viaProxy.rps * 100).toFixed(0)}% (target at least 50%)`);
  if (CPU_PROF) {
    // SIGTERM, not SIGKILL: the profile is written when the process exits on its own.
    serve.child.kill('SIGTERM');
    await new Promise((r) => serve.child.once('exit', r));
    console.log(`\nCPU profile of edgeform serve in ${path.resolve(CPU_PROF)}`);
  }
  pki.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

const roleAt = process.argv.indexOf('--role');
if (roleAt > 0) {
  const [name, ...rest] = process.argv.slice(roleAt + 1);
  const read = (f: string) => fs.readFileSync(f, 'utf8');
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
