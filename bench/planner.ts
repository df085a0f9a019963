// The planner alone (makePlan), over N declared IP policies that all exist and are stamped,
// with no server and no manifest loading: how its own work grows with N. Live state is
// built in memory the way refresh builds it.
//   npx tsx bench/planner.ts --n 2000,10000,50000
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { kindOf } from '../provider/catalog/index.js';
import { decodeMetadata } from '../reconciler/live/stamp.js';
import type { LiveResource, LiveState } from '../reconciler/live/refresh.js';
import { makePlan } from '../reconciler/plan/plan.js';
import { loadDesired } from '../reconciler/session.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};

function measure(n: number) {
  const entry = kindOf('IPPolicy');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-planner-'));
  fs.writeFileSync(path.join(dir, 'p.yaml'), Array.from({ length: n }, (_, i) => `kind: IPPolicy\nname: p${i}\ndescription: p${i}\n`).join('---\n'));
  const manifest = loadDesired([dir]);
  fs.rmSync(dir, { recursive: true });
  const resources: LiveResource[] = Array.from({ length: n }, (_, i) => {
    const id = `ipp_${String(n - i).padStart(27, '0')}`; // newest first, as lists are
    const metadata = JSON.stringify({ edgeform: { stack: 'bench', name: `IPPolicy/p${n - 1 - i}` } });
    const read = { id, uri: `http://127.0.0.1/ip_policies/${id}`, created_at: '2026-11-23T00:00:00Z', description: `p${n - 1 - i}`, metadata };
    const d = decodeMetadata(metadata);
    return { entry, id, read, stamp: d.stamp, userMetadata: d.user, children: { rules: [] } };
  });
  const live: LiveState = { byKind: new Map([['IPPolicy', resources]]), byId: new Map(resources.map((r) => [r.id, r])), kinds: new Set(['IPPolicy', 'IPPolicyRule']) };
  const t0 = performance.now();
  const { plan, problems } = makePlan(manifest, live, { stack: 'bench', apiUrl: 'http://127.0.0.1', mode: 'apply' });
  const ms = performance.now() - t0;
  if (problems.length || plan.changes.some((c) => c.actions[0] !== 'no-op')) throw new Error(`expected a no-op plan: ${problems[0] ?? plan.changes.find((c) => c.actions[0] !== 'no-op')?.address}`);
  return ms;
}

console.log(`load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
console.log('| declared (and live) IP policies | makePlan ms |');
console.log('|---|---|');
for (const n of arg('n', '2000,10000').split(',').map(Number)) console.log(`| ${n.toLocaleString('en')} | ${Math.round(measure(n))} |`);
console.log(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
