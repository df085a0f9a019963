// How long `edgeform` takes to start, beside `node -e 0` measured in the same run: --version,
// --help, validate of a 10-document manifest, and serve on an empty SQLite database until it
// listens. Each with its CPU time too (user + system, of every thread of the process: a
// preloaded file reports process.cpuUsage() at exit; serve's is read from /proc when it
// listens), which a shared machine disturbs less than the wall time.
// The commands run in alternating rounds (node -e 0, --version, validate, serve, node -e 0, ...)
// and each prints its median wall time, so a machine that speeds up or slows down mid-run moves
// all of them alike. bin/edgeform.js runs dist/cli/ (the build is made first, as `npm ci` does);
// --source measures the TypeScript sources through tsx instead (EDGEFORM_FROM_SOURCE=1).
//   npx tsx bench/cli-start.ts [--rounds 7] [--source]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: plain JavaScript, no declarations
import { buildCli } from '../scripts/build-cli.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const argv = process.argv.slice(2);
const rounds = Number(argv.includes('--rounds') ? argv[argv.indexOf('--rounds') + 1] : '7');
const source = argv.includes('--source');
const env = { ...process.env, NO_COLOR: '1', ...(source ? { EDGEFORM_FROM_SOURCE: '1' } : {}) };

if (!source) await (buildCli as () => Promise<number>)();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-cli-start-'));
const manifests = path.join(dir, 'manifests');
fs.mkdirSync(manifests);
const docs = [];
for (let i = 0; i < 4; i++) docs.push(`kind: IPPolicy\nname: office-${i}\nrules:\n  - {cidr: 203.0.113.${i}/32, action: allow}\n`);
for (let i = 0; i < 4; i++) docs.push(`kind: HTTPResponseBackend\nname: hello-${i}\nbody: hello\nstatus_code: 200\n`);
docs.push('kind: WeightedBackend\nname: split\nbackends:\n  HTTPResponseBackend/hello-0: 1\n  HTTPResponseBackend/hello-1: 1\n');
docs.push('kind: HTTPSEdge\nname: web\nhostports: [app.example.com:443]\nroutes:\n  - match_type: path_prefix\n    match: /\n    backend: {backend_id: WeightedBackend/split}\n    ip_restriction: {ip_policy_ids: [IPPolicy/office-0]}\n');
fs.writeFileSync(path.join(manifests, 'ten.yaml'), docs.join('---\n'));

// Preloaded into every process timed (node -e 0 too): its CPU milliseconds at exit, on fd 3.
const cpuReport = path.join(dir, 'cpu-report.cjs');
fs.writeFileSync(cpuReport, "process.on('exit', () => { const c = process.cpuUsage(); try { require('fs').writeSync(3, String((c.user + c.system) / 1000)); } catch {} });\n");

/** CPU milliseconds (user + system) a running process has used, from /proc. */
const cpuOfPid = (pid: number) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};

interface Sample { wall: number; cpu: number }

/** Wall and CPU milliseconds from spawn to exit, or to the first output matching `until` (then the process is stopped). */
function time(args: string[], until?: RegExp): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(process.execPath, ['-r', cpuReport, ...args], { env, cwd: dir, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    let out = '';
    let cpu = '';
    let done = false;
    const seen = (d: Buffer) => {
      out += d;
      if (until && !done && until.test(out)) { done = true; resolve({ wall: performance.now() - start, cpu: cpuOfPid(child.pid!) }); child.kill('SIGTERM'); }
    };
    child.stdout!.on('data', seen);
    child.stderr!.on('data', seen);
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (d) => { cpu += d; });
    child.on('close', (code) => {
      if (done) return;
      if (until || (code !== 0)) reject(new Error(`${args.slice(1).join(' ')} exited ${code}: ${out}`));
      else resolve({ wall: performance.now() - start, cpu: Number(cpu) });
    });
  });
}

const cases: [string, () => Promise<Sample>][] = [
  ['node -e 0', () => time(['-e', '0'])],
  ['edgeform --version', () => time([BIN, '--version'])],
  ['edgeform --help', () => time([BIN, '--help'])],
  ['edgeform validate (10 documents)', () => time([BIN, 'validate', '-f', manifests])],
  ['edgeform serve (empty SQLite) until it listens', async () => {
    fs.rmSync(path.join(dir, 'data'), { recursive: true, force: true });
    return time([BIN, 'serve', '--port', '0', '--data-dir', path.join(dir, 'data')], /listening on/);
  }],
];
const samples = cases.map(() => [] as Sample[]);
for (let r = 0; r < rounds; r++) for (const [i, [, run]] of cases.entries()) samples[i].push(await run());
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const walls = samples.map((xs) => xs.map((x) => x.wall));
const cpus = samples.map((xs) => xs.map((x) => x.cpu));
const [base, baseCpu] = [median(walls[0]), median(cpus[0])];
process.stdout.write(`${source ? 'sources through tsx' : 'compiled (dist/cli)'}, ${rounds} rounds; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}; median wall ms (min-max) and beside node -e 0's; median CPU ms and beside node -e 0's:\n`);
for (const [i, [name]] of cases.entries()) {
  const [m, c] = [median(walls[i]), median(cpus[i])];
  process.stdout.write(`  ${name.padEnd(48)} ${m.toFixed(0).padStart(6)} ms  (${Math.min(...walls[i]).toFixed(0)}-${Math.max(...walls[i]).toFixed(0)})  ${i ? `node -e 0 + ${(m - base).toFixed(0)} ms` : ''.padEnd(18)}   CPU ${c.toFixed(0).padStart(5)} ms${i ? `  (node -e 0 + ${(c - baseCpu).toFixed(0)} ms)` : ''}\n`);
}
fs.rmSync(dir, { recursive: true, force: true });
