// Requests through an SDK-connected tunnel (the service's @ngrok/ngrok over the version-2
// listener) beside the same requests through `edgeform agent` and through a bare Node reverse
// proxy, in one run, on one machine (issue 30). Each is an HTTPS edge route with no modules
// to a tunnel-group backend: only the transport differs.
//   npx tsx bench/sdk-agent.ts [--requests 3000] [--concurrency 16] [--rounds 3]
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const REQUESTS = Number(arg('requests', '3000'));
const CONCURRENCY = Number(arg('concurrency', '16'));
const ROUNDS = Math.max(1, Number(arg('rounds', '3')));
const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const HOST = 'sdk-bench.example.com';
const BODY = 'hello through a tunnel\n';

const children: ChildProcess[] = [];
function start(args: string[], ready: string, env: Record<string, string> = {}): Promise<{ child: ChildProcess; out: () => string }> {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let done = false;
    child.stdout!.on('data', (c) => {
      if (done) return;
      out += c;
      if (out.includes(ready)) { done = true; resolve({ child, out: () => out }); }
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}:\n${out.slice(-2000)}`)));
  });
}
const role = (name: string, ...rest: (string | number)[]) => start(['--import', 'tsx', fileURLToPath(import.meta.url), '--role', name, ...rest.map(String)], 'ready');

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function load(port: number, ca: string, p: string, total: number) {
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca });
  const one = () => new Promise<void>((resolve, reject) => {
    https.get({ host: '127.0.0.1', port, path: p, servername: HOST, headers: { host: HOST }, agent }, (res) => {
      if (res.statusCode !== 200) {
        let body = '';
        res.on('data', (c) => { body += c; });
        res.on('end', () => reject(new Error(`status ${res.statusCode} on ${p}: ${JSON.stringify(res.headers)} ${body.slice(0, 300)}`)));
        return;
      }
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

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-sdk-'));
  const upstream = await freePort();
  await role('upstream', upstream);
  const ingress = await freePort();
  const serve = await start([BIN, 'serve', '--port', '0', '--data-dir', dir, '--api-rate-limit', '0', '--workers', '1', '--ingress', `443=127.0.0.1:${ingress}`, '--agent-listen', '127.0.0.1:0'], 'agent listener', { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
  const apiUrl = serve.out().match(/"url":"(http:[^"]+)"/)![1];
  const agentListen = serve.out().match(/"agent_listen":"([^"]+)"/)![1];
  const caFile = path.join(dir, 'ingress-ca.pem');
  const ca = fs.readFileSync(caFile, 'utf8');
  const api = async (method: string, p: string, body?: unknown) => (await fetch(`${apiUrl}${p}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined })).json() as Promise<any>;
  const manifest = path.join(dir, 'bench.yaml');
  fs.writeFileSync(manifest, [
    { kind: 'TunnelGroupBackend', name: 'sdk', labels: { via: 'sdk' } },
    { kind: 'TunnelGroupBackend', name: 'agent', labels: { via: 'agent' } },
    { kind: 'HTTPSEdge', name: 'bench', hostports: [`${HOST}:443`], routes: [
      { match_type: 'exact_path', match: '/sdk', backend: { backend_id: 'TunnelGroupBackend/sdk' } },
      { match_type: 'exact_path', match: '/agent', backend: { backend_id: 'TunnelGroupBackend/agent' } },
    ] },
  ].map((d) => stringify(d)).join('---\n'));
  const applied = await start([BIN, 'apply', '-f', manifest, '--auto-approve'], '', { EDGEFORM_API_URL: apiUrl, EDGEFORM_API_KEY: TOKEN }).catch((e) => e);
  if (applied instanceof Error && !/exited 0/.test(applied.message)) throw applied;
  const cred = await api('POST', '/credentials', {});
  await start([BIN, 'agent', '--api-url', apiUrl, '--authtoken', cred.token, '--label', 'via=agent', '--forwards-to', `127.0.0.1:${upstream}`], 'online: tn_');
  await role('sdk', `localhost:${agentListen.split(':').pop()}`, caFile, cred.token, upstream);
  const proxy = await freePort();
  await role('bare-proxy', proxy, upstream, path.join(dir, 'ingress-ca-key.pem'), caFile);

  console.log(`machine: ${os.cpus()[0]?.model}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${os.type()} ${os.release()}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`${REQUESTS} GETs per measurement at ${CONCURRENCY} in flight over keep-alive TLS, ${BODY.length}-byte body, warm-up excluded; ${ROUNDS} rounds of each in turn, medians\n`);
  const runs: Record<string, { rps: number; p50: number; p99: number }[]> = { sdk: [], agent: [], bare: [] };
  const targets: [string, number, string][] = [['sdk', ingress, '/sdk'], ['agent', ingress, '/agent'], ['bare', proxy, '/']];
  for (const [, port, p] of targets) await load(port, ca, p, Math.min(500, REQUESTS));
  for (let r = 0; r < ROUNDS; r++) for (const [name, port, p] of targets) runs[name].push(await load(port, ca, p, REQUESTS));
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const m = (name: string) => ({ rps: med(runs[name].map((x) => x.rps)), p50: med(runs[name].map((x) => x.p50)), p99: med(runs[name].map((x) => x.p99)) });
  const row = (label: string, x: { rps: number; p50: number; p99: number }) => `${label.padEnd(46)} ${x.rps.toFixed(0).padStart(6)} req/s   p50 ${x.p50.toFixed(2).padStart(6)} ms   p99 ${x.p99.toFixed(2).padStart(6)} ms`;
  const [sdk, agent, bare] = [m('sdk'), m('agent'), m('bare')];
  console.log(row('edge -> SDK (@ngrok/ngrok 1.7.0, version 2)', sdk));
  console.log(row('edge -> edgeform agent', agent));
  console.log(row('bare Node reverse proxy, same upstream', bare));
  const rounds = (name: string) => runs[name].map((x, i) => `${(x.rps / runs.bare[i].rps * 100).toFixed(0)}%`).join(', ');
  console.log(`\n  SDK: ${(sdk.rps / bare.rps * 100).toFixed(0)}% of the bare proxy (target at least 50%; rounds ${rounds('sdk')}); edgeform agent: ${(agent.rps / bare.rps * 100).toFixed(0)}% (rounds ${rounds('agent')})`);
  console.log(`load average at the end: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  fs.rmSync(dir, { recursive: true, force: true });
}

const roleAt = process.argv.indexOf('--role');
if (roleAt > 0) {
  const [name, ...rest] = process.argv.slice(roleAt + 1);
  process.once('SIGTERM', () => process.exit(0));
  if (name === 'upstream') {
    const s = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(BODY));
    s.keepAliveTimeout = 60_000;
    s.listen(Number(rest[0]), '127.0.0.1', () => process.stdout.write('ready\n'));
  } else if (name === 'sdk') {
    const ngrok = await import('@ngrok/ngrok');
    if (process.env.BENCH_SDK_LOG) ngrok.loggingCallback((level, target, message) => process.stderr.write(`sdk ${level} ${target} ${message}\n`), 'INFO');
    const session = await new ngrok.SessionBuilder().serverAddr(rest[0]).caCert(fs.readFileSync(rest[1])).authtoken(rest[2]).connect();
    await session.labeledListener().label('via', 'sdk').listenAndForward(`http://127.0.0.1:${rest[3]}`);
    // The SDK's native session does not keep Node's event loop alive by itself.
    setInterval(() => {}, 60_000);
    process.stdout.write('ready\n');
  } else if (name === 'bare-proxy') {
    // TLS with a certificate for HOST from the same local CA the edge uses.
    const { issueCertificate } = await import('../server/crypto/x509-build.js');
    const crypto = await import('node:crypto');
    const caPem = fs.readFileSync(rest[3], 'utf8');
    const leaf = issueCertificate({ subject: { commonName: HOST }, issuer: { name: { organization: 'edgeform', commonName: 'edgeform local ingress CA' }, privateKey: crypto.createPrivateKey(fs.readFileSync(rest[2])) }, ca: false, keyUsages: ['digital_signature'], extendedKeyUsages: ['server_auth'], dnsNames: [HOST], days: 1 });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
    https.createServer({ cert: leaf.certificatePem + caPem, key: leaf.privateKeyPem, keepAliveTimeout: 60_000 }, (req, res) => {
      const up = http.request({ host: '127.0.0.1', port: Number(rest[1]), method: req.method, path: req.url, headers: { ...req.headers, 'x-forwarded-for': req.socket.remoteAddress ?? '' }, agent }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.writeHead(502).end());
      req.pipe(up);
    }).listen(Number(rest[0]), '127.0.0.1', () => process.stdout.write('ready\n'));
  }
} else {
  try {
    await main();
  } finally {
    for (const c of children) c.kill('SIGKILL');
  }
}
