// One run of continuous reconcile: read the manifests again, take the stack lock, plan, and
// (unless dry-run) carry out a plan without problems. It never throws: whatever went wrong
// is the report's `errors`, so the loop logs it, counts it and backs off. Nothing here prints.
import { acquireLock, describeHolder, LockHeld } from '../apply/lock.js';
import { execute } from '../apply/execute.js';
import { isNoop, summarize, type Plan } from '../plan/types.js';
import { clientFor, loadDesired, planWith, type Target } from '../session.js';
import type { FileOptions } from '../manifest/load.js';
import type { FingerprintCache } from '../live/secret-fingerprints.js';

/** How a run ended, as notifications name it (docs/gitops.md). */
export type Outcome = 'success' | 'failure' | 'drift_repaired' | 'drift_found';

export interface RunOptions {
  target: Target;
  files: string[];
  cdktf: string[];
  fileOptions?: FileOptions;
  prune: boolean;
  dryRun: boolean;
  /** Take the stack lock for the run (default true), waiting up to lockTimeoutMs for another run's. */
  lock: boolean;
  lockTimeoutMs: number;
  /** The command line other runs see on the lock. */
  command: string;
  /** Secret fingerprints kept from one run to the next (the server's budget for them is small). */
  fingerprintCache?: FingerprintCache;
  /** Turns an error into the one line a user reads (the CLI's `explain`). */
  explain: (e: unknown) => string;
}

export interface RunReport {
  outcome: Outcome;
  /** Start of the run (ISO 8601). */
  time: string;
  stack: string;
  dryRun: boolean;
  /** Changes carried out (dry-run: none). */
  applied: { add: number; change: number; destroy: number };
  /** Changes the plan had (dry-run: what a run would carry out). */
  planned: { add: number; change: number; destroy: number };
  /** Resources changed outside edgeform since the last apply (and, by address, which). */
  drift: number;
  driftAddresses: string[];
  /** Resources the manifests declare that the stack manages (or will once applied). */
  managed: number;
  apiCalls: number;
  durationMs: number;
  errors: string[];
  warnings: string[];
}

const zero = () => ({ add: 0, change: 0, destroy: 0 });

/** Whether a change puts back something changed or deleted outside edgeform. */
const isDrift = (c: Plan['changes'][number]) => !!c.drift || !!c.deletedOutside;

export async function reconcileOnce(opts: RunOptions): Promise<RunReport> {
  const started = Date.now();
  const report: RunReport = {
    outcome: 'success',
    time: new Date(started).toISOString(),
    stack: opts.target.stack,
    dryRun: opts.dryRun,
    applied: zero(),
    planned: zero(),
    drift: 0,
    driftAddresses: [],
    managed: 0,
    apiCalls: 0,
    durationMs: 0,
    errors: [],
    warnings: [],
  };
  const client = clientFor(opts.target);
  // Its own connection, as apply's: renewals must not queue behind the run's calls.
  const lockClient = clientFor({ ...opts.target, parallelism: 1 });
  const stop = new AbortController();
  let release: (() => Promise<string | undefined>) | undefined;
  try {
    // Read first, offline: a manifest that does not parse costs no API call and takes no lock.
    const manifest = loadDesired(opts.files, opts.cdktf, opts.fileOptions);
    if (!opts.lock) report.warnings.push(`--lock=false: running without the stack lock; another run on stack "${opts.target.stack}" at the same time may duplicate or undo this one's changes`);
    else {
      try {
        const lease = await acquireLock(lockClient, {
          stack: opts.target.stack,
          command: opts.command,
          timeoutMs: opts.lockTimeoutMs,
          onLost: (why) => {
            report.errors.push(`the lock on stack "${opts.target.stack}" was lost: ${why}; the run stopped`);
            stop.abort();
          },
        });
        if (!lease) report.warnings.push(`the server at ${opts.target.apiUrl} has no stack locks; running without one`);
        release = lease ? () => lease.release() : undefined;
      } catch (e) {
        if (e instanceof LockHeld) throw new Error(`stack "${opts.target.stack}" is locked by ${describeHolder(e.holder)}; this run is skipped and tried again later`);
        throw e;
      }
    }
    const planned = await planWith(client, manifest, { stack: opts.target.stack, apiUrl: opts.target.apiUrl, mode: 'apply', prune: opts.prune }, opts.fingerprintCache);
    report.warnings.push(...(planned.warnings ?? []));
    const active = planned.plan.changes.filter((c) => !isNoop(c));
    const drifted = active.filter(isDrift);
    report.drift = drifted.length;
    report.driftAddresses = drifted.map((c) => c.address);
    report.planned = summarize(active);
    report.managed = planned.plan.changes.filter((c) => !(c.actions.length === 1 && c.actions[0] === 'delete')).length;
    // Never a plan with problems: nothing of it is carried out.
    if (planned.problems.length) throw new Error(`the plan cannot be carried out: ${planned.problems.join('; ')}`);
    if (!opts.dryRun && active.length) {
      const result = await execute(client, planned.plan, { parallelism: opts.target.parallelism ?? 10, batchSize: opts.target.batchSize, signal: stop.signal });
      report.applied = summarize(result.done);
      for (const f of result.failures) report.errors.push(`${f.address}: ${f.message}`);
      if (result.notDone?.length && !report.errors.length) report.errors.push(`not done: ${result.notDone.join(', ')}`);
    }
  } catch (e) {
    report.errors.push(opts.explain(e));
  } finally {
    const problem = await release?.();
    if (problem) report.warnings.push(problem);
    report.apiCalls = client.calls + lockClient.calls;
    await client.close();
    await lockClient.close();
  }
  report.outcome = report.errors.length ? 'failure' : report.drift ? (opts.dryRun ? 'drift_found' : 'drift_repaired') : 'success';
  report.durationMs = Date.now() - started;
  return report;
}
