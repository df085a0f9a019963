// The plan benchmark (issue 5, "Where we beat the anchors"): for each N, a fresh local server
// gets N declared resources applied by the reconciler; then, each in a fresh process, a
// no-op plan, a plan after 1% of the set drifted out of band, and a Terraform-style
// refresh (one GET per resource) of the same set. Prints wall time, API calls and peak RSS.
//   npx tsx bench/plan.ts [--n 1000,10000] [--runs 3] [--parallelism 10] [--cpu-prof DIR]
// --cpu-prof writes a V8 CPU profile of every measured process into DIR (open in Chrome
// DevTools or speedscope).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { resolveConfig } from '../server/config.js';
import { startServer } from '../server/main.js';
import { execute } from '../reconciler/apply/execute.js';
import { refresh } from '../reconciler/live/refresh.js';
import { kindOf } from '../provider/catalog/index.js';
import { clientFor, loadDesired, planWith } from '../reconciler/session.js';
import { driftOnePercent, stateOf, UNIT, writeManifests } from './managed-set.js';
import type { Measured } from './measure-plan.js';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxyzAB';

function args() {
  const out = { n: [1000, 10000], runs: 3, parallelism: 10, cpuProf: undefined as string | undefined };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i + 1];
    if (argv[i] === '--n') out.n = v.split(',').map(Number);
    else if (argv[i] === '--runs') out.runs = Number(v);
    else if (argv[i] === '--parallelism') out.parallelism = Number(v);
    else if (argv[i] === '--cpu-prof') out.cpuProf = path.resolve(v);
    else throw new Error(`unknown argument ${argv[i]}; usage: bench/plan.ts [--n 1000,10000] [--runs 3] [--parallelism 10] [--cpu-prof DIR]`);
    i++;
  }
  for (const n of out.n) if (!Number.isInteger(n) || n < UNIT || n % UNIT) throw new Error(`--n takes multiples of ${UNIT}, not ${n}`);
  return out;
}

function hardware(): string {
  const cpus = os.cpus();
  return [
    `CPU: ${cpus[0]?.model ?? 'unknown'}, ${cpus.length} cores (${os.availableParallelism()} available)`,
    `RAM: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB (${(os.freemem() / 2 ** 30).toFixed(1)} GiB free)`,
    `Node ${process.version}, ${os.type()} ${os.release()} ${os.arch()}`,
    `load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (the machine is shared: others' work slows these figures)`,
    `date: ${new Date().toISOString()}`,
  ].join('\n');
}

/** Runs bench/measure-plan.ts in a fresh process; its own figures plus the whole process's wall time. */
async function measure(mode: 'plan' | 'get-each', url: string, target: string, cpuProf?: string): Promise<Measured & { processMs: number }> {
  const t0 = performance.now();
  const prof = cpuProf ? ['--cpu-prof', '--cpu-prof-dir', cpuProf] : [];
  const { stdout } = await run(process.execPath, [...prof, '--import', 'tsx', path.join(here, 'measure-plan.ts'), mode, url, TOKEN, target], { maxBuffer: 64 * 2 ** 20 });
  return { ...(JSON.parse(stdout) as Measured), processMs: performance.now() - t0 };
}

/** The run with the median wall time (runs vary with what else the machine does). */
async function median(times: number, fn: () => Promise<Measured & { processMs: number }>) {
  const all: Array<Measured & { processMs: number }> = [];
  for (let i = 0; i < times; i++) all.push(await fn());
  all.sort((a, b) => a.ms - b.ms);
  return { ...all[Math.floor(all.length / 2)], range: [all[0].ms, all[all.length - 1].ms] as const };
}

const s = (ms: number) => (ms / 1000).toFixed(2);

async function bench(n: number, opts: ReturnType<typeof args>) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-'));
  const server = await startServer({ ...resolveConfig({ port: 0, dataDir: dir, apiRateLimit: 0 }, {}), fingerprintRateLimit: 0, bootstrapToken: TOKEN, log: () => {} });
  try {
    const manifests = path.join(dir, 'manifests');
    const { units, documents } = writeManifests(manifests, n);
    const target = { apiUrl: server.url, apiKey: TOKEN, stack: 'bench', parallelism: opts.parallelism };
    const client = clientFor(target);

    const t0 = performance.now();
    const planned = await planWith(client, loadDesired([manifests]), { stack: 'bench', apiUrl: server.url, mode: 'apply' });
    const applied = await execute(client, planned.plan, { parallelism: opts.parallelism });
    if (applied.failures.length) throw new Error(`setup apply failed: ${applied.failures.slice(0, 3).map((f) => f.message).join('; ')}`);
    const setupMs = performance.now() - t0;

    const live = await refresh(client, planned.kinds.map(kindOf));
    const state = stateOf(live, 'bench');
    if (state.length !== n) throw new Error(`expected ${n} live resources, found ${state.length}`);
    const stateFile = path.join(dir, 'state.json');
    fs.writeFileSync(stateFile, JSON.stringify(state));

    const noop = await median(opts.runs, () => measure('plan', server.url, manifests, opts.cpuProf));
    if (noop.changed!.length) throw new Error(`a plan right after apply changes ${noop.changed!.length} resources, e.g. ${noop.changed!.slice(0, 3).join('; ')}`);
    const drifted = await driftOnePercent(client, live, units);
    const drift = await median(opts.runs, () => measure('plan', server.url, manifests, opts.cpuProf));
    if (drift.changed!.length !== drifted) throw new Error(`${drifted} resources drifted, the plan changes ${drift.changed!.length}: ${drift.changed!.slice(0, 5).join('; ')}`);
    const getEach = await median(opts.runs, () => measure('get-each', server.url, stateFile, opts.cpuProf));
    await client.close();

    const row = (label: string, m: Measured & { processMs: number; range: readonly [number, number] }) =>
      `| ${label} | ${s(m.ms)} (${s(m.range[0])}-${s(m.range[1])}) | ${s(m.processMs)} | ${m.calls} | ${m.peakRssMb} (${m.baseRssMb} at start) | ${Object.entries(m.phases).map(([k, v]) => `${k} ${s(v)}`).join(', ')} |`;
    return [
      `### N = ${n} declared resources`,
      '',
      `${units} units of ${UNIT}: ${units * 2} IP policies, ${units * 4} rules, ${units} HTTP response backends, ${units} HTTPS edges with TLS termination, ${units * 2} routes (backend, IP restriction, request and response headers, compression, circuit breaker; webhook verification with a secret, user-agent filter); ${documents} manifest documents.`,
      `Setup: the reconciler applied them in ${s(setupMs)} s (${applied.done.length} changes, parallelism ${opts.parallelism}).`,
      '',
      `| run (median of ${opts.runs}) | wall s (range) | process s | API calls | peak RSS MB | phases s |`,
      '|---|---|---|---|---|---|',
      row('no-op plan', noop),
      row(`plan with 1% drift (${drifted} changed out of band, ${drift.drift} shown as drift)`, drift),
      row('one GET per resource (how Terraform refreshes, parallelism 10)', getEach),
      '',
      `Ratio, one GET per resource / no-op plan: ${(getEach.ms / noop.ms).toFixed(1)}x the wall time, ${(getEach.calls / noop.calls).toFixed(0)}x the API calls (${(n / noop.calls).toFixed(0)} declared resources per call). Targets: ${n >= 10000 ? `no-op plan under 5 s: ${noop.ms < 5000 ? 'met' : 'MISSED'}; under 300 MB: ${noop.peakRssMb < 300 ? 'met' : 'MISSED'}` : `at most 1 call per 50 resources (${n / 50}): ${noop.calls <= n / 50 ? 'met' : 'MISSED'}`}.`,
      '',
    ].join('\n');
  } finally {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const opts = args();
const out: string[] = [hardware(), ''];
process.stdout.write(`${out.join('\n')}\n`);
for (const n of opts.n) {
  const text = await bench(n, opts);
  process.stdout.write(`${text}\n`);
}
process.stdout.write(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
