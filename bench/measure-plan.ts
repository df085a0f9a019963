// One measured run in a fresh process, so its peak RSS is its own (not the server's, not the
// setup's). Prints one JSON line. bench/plan.ts runs it; by hand:
//   npx tsx bench/measure-plan.ts plan <api-url> <api-key> <manifest-dir>
//   npx tsx bench/measure-plan.ts get-each <api-url> <api-key> <state.json>
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { kindOf } from '../provider/catalog/index.js';
import { isNoop } from '../reconciler/plan/types.js';
import { plain, renderPlan } from '../reconciler/render/text.js';
import { clientFor, loadDesired, planWith } from '../reconciler/session.js';
import type { StateEntry } from './managed-set.js';

export interface Measured {
  /** Milliseconds of the whole run (load, refresh, plan, render; or every GET). */
  ms: number;
  /** Phases, milliseconds. */
  phases: Record<string, number>;
  calls: number;
  /** Peak resident set size of this process, MB. */
  peakRssMb: number;
  /** RSS once the code was loaded and before the work, MB. */
  baseRssMb: number;
  /** Changes that are not no-ops (plan runs), and how many of them are drift. */
  changed?: string[];
  drift?: number;
}

const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

async function measurePlan(apiUrl: string, apiKey: string, dir: string): Promise<Measured> {
  const baseRssMb = mb(process.memoryUsage.rss());
  const t0 = performance.now();
  const manifest = loadDesired([dir]);
  const t1 = performance.now();
  const client = clientFor({ apiUrl, apiKey, stack: 'bench' });
  const planned = await planWith(client, manifest, { stack: 'bench', apiUrl, mode: 'apply' });
  const t2 = performance.now();
  const text = renderPlan(planned.plan, plain);
  const t3 = performance.now();
  await client.close();
  if (planned.problems.length) throw new Error(`the plan has problems: ${planned.problems.slice(0, 3).join('; ')}`);
  if (!text) throw new Error('empty rendering');
  const changed = planned.plan.changes.filter((c) => !isNoop(c));
  return {
    ms: t3 - t0,
    phases: { load: t1 - t0, 'refresh+plan': t2 - t1, render: t3 - t2 },
    calls: planned.plan.apiCalls,
    peakRssMb: mb(process.resourceUsage().maxRSS * 1024),
    baseRssMb,
    changed: changed.map((c) => `${c.address} ${c.actions.join(',')}`),
    drift: changed.filter((c) => c.drift).length,
  };
}

/** Terraform's refresh: one GET per resource in the state, at its default parallelism of 10. */
async function measureGetEach(apiUrl: string, apiKey: string, stateFile: string): Promise<Measured> {
  const baseRssMb = mb(process.memoryUsage.rss());
  const t0 = performance.now();
  const state: StateEntry[] = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  const client = clientFor({ apiUrl, apiKey, stack: 'bench', parallelism: 10 });
  const reads = await Promise.all(state.map((s) => client.get(kindOf(s.kind), s.id, s.parent)));
  const missing = reads.filter((r) => !r).length;
  await client.close();
  if (missing) throw new Error(`${missing} resources of the state are gone`);
  const ms = performance.now() - t0;
  return { ms, phases: { reads: ms }, calls: client.calls, peakRssMb: mb(process.resourceUsage().maxRSS * 1024), baseRssMb };
}

const [mode, apiUrl, apiKey, target] = process.argv.slice(2);
const run = mode === 'plan' ? measurePlan : mode === 'get-each' ? measureGetEach : undefined;
if (!run || !target) {
  process.stderr.write('usage: measure-plan.ts plan|get-each API_URL API_KEY MANIFEST_DIR|STATE_FILE\n');
  process.exit(2);
}
run(apiUrl, apiKey, target).then(
  (m) => process.stdout.write(`${JSON.stringify(m)}\n`),
  (e) => {
    process.stderr.write(`${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
