// Steady-state runs of continuous reconcile in a fresh process (its CPU its own, not the
// server's): `runs` runs of reconcileOnce, one after another as the loop makes them, each
// with its API calls, wall time and CPU seconds (user + system). Prints one JSON line.
// bench/reconcile.ts runs it; by hand:
//   npx tsx bench/measure-reconcile.ts <api-url> <api-key> <manifest-dir> <stack> <runs>
import { performance } from 'node:perf_hooks';
import { reconcileOnce } from '../reconciler/continuous/run.js';

const [apiUrl, apiKey, dir, stack, runs] = process.argv.slice(2);
const fingerprintCache = new Map<string, string>();
const out: Array<{ calls: number; ms: number; cpuS: number; outcome: string; changes: number; managed: number }> = [];
for (let i = 0; i < Number(runs); i++) {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const r = await reconcileOnce({
    target: { apiUrl, apiKey, stack, parallelism: 10 },
    files: [dir],
    cdktf: [],
    prune: false,
    dryRun: false,
    lock: true,
    lockTimeoutMs: 0,
    command: 'bench/measure-reconcile.ts',
    fingerprintCache,
    explain: (e) => (e as Error).message,
  });
  const used = process.cpuUsage(cpu);
  out.push({ calls: r.apiCalls, ms: performance.now() - t0, cpuS: (used.user + used.system) / 1e6, outcome: r.outcome, changes: r.planned.add + r.planned.change + r.planned.destroy, managed: r.managed });
  if (r.errors.length) throw new Error(r.errors.join('; '));
}
process.stdout.write(`${JSON.stringify({ runs: out, peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024) })}\n`);
