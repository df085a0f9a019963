// How long `edgeform` takes to start, beside `node -e 0` measured in the same run: --version,
// validate of a 10-document manifest, and serve on an empty SQLite database until it listens.
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

/** Wall milliseconds from spawn to exit, or to the first output matching `until` (then the process is stopped). */
function time(args: string[], until?: RegExp): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(process.execPath, args, { env, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let done = false;
    const seen = (d: Buffer) => {
      out += d;
      if (until && !done && until.test(out)) { done = true; resolve(performance.now() - start); child.kill('SIGTERM'); }
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', (code) => {
      if (done) return;
      if (until || (code !== 0)) reject(new Error(`${args.slice(1).join(' ')} exited ${code}: ${out}`));
      else resolve(performance.now() - start);
    });
  });
}

const cases: [string, () => Promise<number>][] = [
  ['node -e 0', () => time(['-e', '0'])],
  ['edgeform --version', () => time([BIN, '--version'])],
  ['edgeform validate (10 documents)', () => time([BIN, 'validate', '-f', manifests])],
  ['edgeform serve (empty SQLite) until it listens', async () => {
    fs.rmSync(path.join(dir, 'data'), { recursive: true, force: true });
    return time([BIN, 'serve', '--port', '0', '--data-dir', path.join(dir, 'data')], /listening on/);
  }],
];
const samples = cases.map(() => [] as number[]);
for (let r = 0; r < rounds; r++) for (const [i, [, run]] of cases.entries()) samples[i].push(await run());
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(samples[0]);
process.stdout.write(`${source ? 'sources through tsx' : 'compiled (dist/cli)'}, ${rounds} rounds, median wall ms (min-max), and the median beside node -e 0's:\n`);
for (const [i, [name]] of cases.entries()) {
  const m = median(samples[i]);
  process.stdout.write(`  ${name.padEnd(48)} ${m.toFixed(0).padStart(6)} ms  (${Math.min(...samples[i]).toFixed(0)}-${Math.max(...samples[i]).toFixed(0)})  ${i ? `node -e 0 + ${(m - base).toFixed(0)} ms` : ''}\n`);
}
fs.rmSync(dir, { recursive: true, force: true });
