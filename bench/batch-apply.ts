// A 5,000-resource apply against `edgeform serve` with its default settings (issue 29: one
// request per write took 530 s at the default 600 requests a minute per key), and what a
// write costs the server alone and in a batch (the ground for counting a batch one request
// per 10 operations against that limit).
//   1. `edgeform serve` (default rate limits; only its port and data folder chosen), then
//      `edgeform apply` of bench/managed-set.ts's N declared resources as a process of its
//      own: the wall time, the requests the server logged (429s among them), and the CPU
//      seconds of both processes;
//   2. against a server with no rate limit, W creates of an IP policy sent one request each
//      (10 in flight, as apply does) and then in batches of 100 (10 in flight): wall time
//      and the server's CPU seconds per write.
// Usage: npx tsx bench/batch-apply.ts [--n 5000] [--writes 2000]
// (run `npm run build:cli` first: the processes run the compiled CLI when it is current.)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeManifests } from './managed-set.js';

const argv = process.argv.slice(2);
const arg = (name: string, dflt: string) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt);
const N = Number(arg('--n', '5000'));
const WRITES = Number(arg('--writes', '2000'));
const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const children: ChildProcess[] = [];
process.on('exit', () => { for (const c of children) c.kill('SIGKILL'); });

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** CPU seconds (user + system) of a process so far, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Serve { child: ChildProcess; url: string; lines: string[] }

async function serve(dir: string, extra: string[] = []): Promise<Serve> {
  const port = await freePort();
  const child = spawn(process.execPath, [BIN, 'serve', '--port', String(port), '--data-dir', dir, ...extra], { env: { ...process.env, EDGEFORM_BOOTSTRAP_TOKEN: TOKEN }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const lines: string[] = [];
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (c) => {
      buf += c;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        lines.push(line);
        if (line.includes('listening on')) resolve();
      }
    });
    child.on('exit', (code) => reject(new Error(`serve exited ${code}`)));
  });
  return { child, url: `http://127.0.0.1:${port}`, lines };
}

async function stop(s: Serve) {
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
}

async function applyBench() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-batch-'));
  const manifests = path.join(dir, 'manifests');
  writeManifests(manifests, N);
  const s = await serve(path.join(dir, 'data'));
  const before = s.lines.length;
  const cpu0 = cpuSeconds(s.child.pid!);
  const t0 = performance.now();
  const apply = spawn(process.execPath, [BIN, 'apply', '-f', manifests, '--auto-approve'], { env: { ...process.env, EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: TOKEN, EDGEFORM_STACK: 'bench' }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(apply);
  let out = '';
  apply.stdout!.on('data', (c) => { out += c; });
  apply.stderr!.on('data', (c) => { out += c; });
  let applyCpu = 0;
  const sampler = setInterval(() => { try { applyCpu = cpuSeconds(apply.pid!); } catch { /* exited */ } }, 200);
  const code = await new Promise<number>((r) => apply.once('exit', (c) => r(c ?? 1)));
  clearInterval(sampler);
  const ms = performance.now() - t0;
  const serverCpu = cpuSeconds(s.child.pid!) - cpu0;
  const entries = s.lines.slice(before).filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).filter((e) => e.status !== undefined);
  const requests = entries.filter((e) => !e.batch_operation_id);
  const batches = requests.filter((e) => e.path === '/_edgeform/batch');
  const summary = /Apply complete![^\n]*/.exec(out)?.[0] ?? `exit ${code}: ${out.slice(-2000)}`;
  console.log(`apply of ${N} declared resources: ${(ms / 1000).toFixed(1)} s wall (exit ${code}); ${summary}`);
  console.log(`  ${requests.length} HTTP requests (${batches.length} batches carrying ${entries.length - requests.length} operations), ${requests.filter((e) => e.status === 429).length} answered 429`);
  console.log(`  CPU: edgeform serve ${serverCpu.toFixed(1)} s, edgeform apply ${applyCpu.toFixed(1)} s (sampled every 200 ms)`);
  await stop(s);
  fs.rmSync(dir, { recursive: true, force: true });
}

async function writesBench() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-batch-writes-'));
  const s = await serve(dir, ['--api-rate-limit', '0']);
  const headers = { Authorization: `Bearer ${TOKEN}`, 'Service-Version': '2', 'Content-Type': 'application/json' };
  const inFlight = async (n: number, one: (i: number) => Promise<void>) => {
    let next = 0;
    await Promise.all(Array.from({ length: 10 }, async () => { while (next < n) await one(next++); }));
  };
  const post = async (p: string, body: unknown) => {
    const r = await fetch(`${s.url}${p}`, { method: 'POST', headers, body: JSON.stringify(body) });
    if (r.status >= 300) throw new Error(`${p}: ${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  };
  await inFlight(200, (i) => post('/ip_policies', { description: `warm ${i}` })); // warm-up
  const measure = async (label: string, run: () => Promise<void>) => {
    const c0 = cpuSeconds(s.child.pid!);
    const t0 = performance.now();
    await run();
    const ms = performance.now() - t0;
    const cpu = cpuSeconds(s.child.pid!) - c0;
    console.log(`${label}: ${WRITES} creates in ${(ms / 1000).toFixed(2)} s (${Math.round(WRITES / (ms / 1000))}/s); server CPU ${cpu.toFixed(2)} s, ${Math.round((cpu * 1e6) / WRITES)} µs per write`);
    return cpu / WRITES;
  };
  const alone = await measure('one request each, 10 in flight   ', () => inFlight(WRITES, (i) => post('/ip_policies', { description: `alone ${i}` })));
  const batched = await measure('batches of 100, 10 batches in flight', () => inFlight(Math.ceil(WRITES / 100), (b) => post('/_edgeform/batch', { operations: Array.from({ length: Math.min(100, WRITES - b * 100) }, (_v, k) => ({ method: 'POST', path: '/ip_policies', body: { description: `batched ${b * 100 + k}` } })) })));
  console.log(`a write in a batch costs the server ${(batched / alone).toFixed(2)} of one sent alone (${(alone / batched).toFixed(1)}x fewer CPU seconds)`);
  await stop(s);
  fs.rmSync(dir, { recursive: true, force: true });
}

console.log(`bench/batch-apply: ${os.cpus()[0].model}, ${os.cpus().length} cores, Node ${process.version}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
await applyBench();
await writesBench();
console.log(`load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
process.exit(0);
