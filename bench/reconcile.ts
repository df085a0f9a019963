// The steady-state cost of `edgeform reconcile` (issue 19): N declared resources applied
// (bench/managed-set.ts, as bench/plan.ts), then, in a fresh process, several runs in a row
// with no drift, as the loop makes them on its interval: API calls, wall time and CPU
// seconds per run. The first run of a process also pays for loading the code's lazy parts.
//   npx tsx bench/reconcile.ts [--n 10000] [--runs 5]
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { resolveConfig } from '../server/config.js';
import { startServer } from '../server/main.js';
import { execute } from '../reconciler/apply/execute.js';
import { clientFor, loadDesired, planWith } from '../reconciler/session.js';
import { writeManifests } from './managed-set.js';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxyzAB';
const argv = process.argv.slice(2);
const arg = (name: string, dflt: string) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt);
const n = Number(arg('--n', '10000'));
const runs = Number(arg('--runs', '5'));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-'));
// No budgets: the setup alone asks for a fingerprint of each of its 2,000 secrets (the default budget is 1,000 an hour).
const server = await startServer({ ...resolveConfig({ port: 0, dataDir: dir, apiRateLimit: 0 }, {}), fingerprintRateLimit: 0, bootstrapToken: TOKEN, log: () => {} });
try {
  const manifests = path.join(dir, 'manifests');
  writeManifests(manifests, n);
  const client = clientFor({ apiUrl: server.url, apiKey: TOKEN, stack: 'bench', parallelism: 10 });
  const planned = await planWith(client, loadDesired([manifests]), { stack: 'bench', apiUrl: server.url, mode: 'apply' });
  const applied = await execute(client, planned.plan, { parallelism: 10 });
  await client.close();
  if (applied.failures.length) throw new Error(`setup apply failed: ${applied.failures[0].message}`);
  const load = os.loadavg()[0];
  const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(here, 'measure-reconcile.ts'), server.url, TOKEN, manifests, 'bench', String(runs)], { maxBuffer: 16 * 2 ** 20 });
  const m = JSON.parse(stdout) as { runs: Array<{ calls: number; ms: number; cpuS: number; outcome: string; changes: number; managed: number }>; peakRssMb: number };
  for (const r of m.runs) if (r.changes || r.outcome !== 'success') throw new Error(`a steady-state run changed something: ${JSON.stringify(r)}`);
  const later = m.runs.slice(1);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  process.stdout.write(
    [
      `${os.cpus()[0]?.model}, ${os.cpus().length} cores, Node ${process.version}, load average ${load.toFixed(2)} at the runs, ${new Date().toISOString()}`,
      `N = ${n} declared resources (${m.runs[0].managed} managed), ${runs} runs in one process, no drift; peak RSS ${m.peakRssMb} MB`,
      '',
      '| run | API calls | wall s | CPU s (user+system) |',
      '|---|---|---|---|',
      ...m.runs.map((r, i) => `| ${i + 1} | ${r.calls} | ${(r.ms / 1000).toFixed(2)} | ${r.cpuS.toFixed(2)} |`),
      '',
      `Steady state (median of runs 2-${runs}): ${median(later.map((r) => r.calls))} API calls, ${median(later.map((r) => r.cpuS)).toFixed(2)} CPU s, ${(median(later.map((r) => r.ms)) / 1000).toFixed(2)} s wall per run.`,
      '',
    ].join('\n'),
  );
} finally {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
