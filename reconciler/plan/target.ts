// Resource targeting, as Terraform's and OpenTofu's -target and -exclude: a plan narrowed
// to some addresses after it is made. A target keeps what it needs (the changes whose
// operations its operations wait for: a new policy a route refers to); an exclusion drops
// what needs it too. A pattern that matches nothing is an error, never "No changes"
// (hashicorp/terraform#30434).
import { didYouMean } from '../../provider/catalog/validate/suggest.js';
import type { Change, Operation, Plan } from './types.js';

/** `Kind/name` (the document and its children), `Kind/name.routes["/api"]` (one child), or `Kind/*`. */
export function matchesAddress(pattern: string, address: string): boolean {
  if (pattern.endsWith('/*')) return address.startsWith(pattern.slice(0, -1));
  return address === pattern || address.startsWith(`${pattern}.`);
}

export const TARGET_WARNING =
  'Resource targeting is in effect: only the targeted resources and what they need are planned, so the plan may be incomplete and other changes wait for a run without --target/--exclude. Use it for exceptional situations (an incident, a mistake to undo), not as part of routine work.';

export interface TargetResult {
  plan: Plan;
  problems: string[];
  warnings: string[];
}

export function targetPlan(plan: Plan, targets: readonly string[], excludes: readonly string[]): TargetResult {
  if (!targets.length && !excludes.length) return { plan, problems: [], warnings: [] };
  const addresses = [...plan.changes.map((c) => c.address), ...plan.orphans];
  const problems: string[] = [];
  for (const [flag, list] of [['--target', targets], ['--exclude', excludes]] as const) {
    for (const p of list) {
      if (addresses.some((a) => matchesAddress(p, a))) continue;
      problems.push(`${flag} ${p} matches no resource of this plan${didYouMean(p, addresses)}; addresses are Kind/name, Kind/name.routes["/path"] or Kind/*`);
    }
  }
  if (problems.length) return { plan, problems, warnings: [] };

  const changeOf = new Map<number, Change>();
  for (const c of plan.changes) for (const i of c.operations) changeOf.set(i, c);
  // What each change's operations wait for, as changes.
  const needs = new Map<Change, Set<Change>>();
  for (const c of plan.changes) {
    const set = new Set<Change>();
    for (const i of c.operations) for (const a of plan.operations[i].after) { const d = changeOf.get(a); if (d && d !== c) set.add(d); }
    needs.set(c, set);
  }
  let keep = new Set(plan.changes);
  if (targets.length) {
    keep = new Set();
    // A document comes with its children (a policy with its rules), as a target names them too.
    const children = (c: Change) => (c.address.includes('.') ? [] : plan.changes.filter((x) => x.address.startsWith(`${c.address}.`)));
    const visit = (c: Change) => { if (keep.has(c)) return; keep.add(c); for (const d of [...needs.get(c)!, ...children(c)]) visit(d); };
    for (const c of plan.changes) if (targets.some((t) => matchesAddress(t, c.address))) visit(c);
  }
  if (excludes.length) {
    const dropped = new Set(plan.changes.filter((c) => excludes.some((e) => matchesAddress(e, c.address))));
    // What needs a dropped change goes too (a route that would refer to an excluded new backend).
    for (let grew = true; grew;) {
      grew = false;
      for (const c of plan.changes) if (!dropped.has(c) && [...needs.get(c)!].some((d) => dropped.has(d))) { dropped.add(c); grew = true; }
    }
    for (const c of dropped) keep.delete(c);
  }

  const kept = plan.changes.filter((c) => keep.has(c));
  const renumber = new Map<number, number>();
  const operations: Operation[] = [];
  for (const op of plan.operations) {
    const c = changeOf.get(op.index);
    if (!c || !keep.has(c)) continue;
    renumber.set(op.index, operations.length);
    operations.push({ ...op, index: operations.length });
  }
  for (const op of operations) op.after = op.after.filter((a) => renumber.has(a)).map((a) => renumber.get(a)!);
  const changes = kept.map((c) => ({ ...c, operations: c.operations.map((i) => renumber.get(i)!) }));
  const orphans = plan.orphans.filter((o) => (!targets.length || targets.some((t) => matchesAddress(t, o))) && !excludes.some((e) => matchesAddress(e, o)));
  return { plan: { ...plan, changes, operations, orphans, targeted: { targets: [...targets], excludes: [...excludes] } }, problems: [], warnings: [TARGET_WARNING] };
}
