// `--notify URL`, `--notify-secret` and `--notify-on` of `reconcile` and `apply`.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { NOTIFY_OUTCOMES, NOTIFY_SIGNATURE_HEADER, sendNotification, type Notification, type NotifyTarget } from '../reconciler/notify.js';
import type { Outcome, RunReport } from '../reconciler/continuous/run.js';
import type { Io } from './reconcile.js';
import type { ExecuteResult } from '../reconciler/apply/execute.js';
import { isNoop, summarize, type Plan } from '../reconciler/plan/types.js';

function parseOutcomes(v: string): Outcome[] {
  const list = v.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = list.filter((o) => !NOTIFY_OUTCOMES.includes(o as Outcome));
  if (!list.length || bad.length) throw new InvalidArgumentError(`It must be a comma-separated list of ${NOTIFY_OUTCOMES.join(', ')}.`);
  return list as Outcome[];
}

function parseUrl(v: string): string {
  if (!/^https?:\/\/[^/]/i.test(v) || !URL.canParse(v)) throw new InvalidArgumentError('It must be an http(s) URL.');
  return v;
}

export function notifyOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--notify <url>', "POST each run's outcome (success, failure, drift_repaired, drift_found) as JSON to this webhook").env('EDGEFORM_NOTIFY_URL').argParser(parseUrl))
    .addOption(new Option('--notify-secret <secret>', `sign notifications: ${NOTIFY_SIGNATURE_HEADER}: sha256=<hex HMAC-SHA256 of the body> (prefer the environment variable)`).env('EDGEFORM_NOTIFY_SECRET'))
    .addOption(new Option('--notify-on <outcomes>', `only these outcomes (comma-separated; default: all of ${NOTIFY_OUTCOMES.join(', ')})`).argParser(parseOutcomes));
}

export function notifyTargetOf(opts: Record<string, any>): NotifyTarget | undefined {
  return opts.notify ? { url: opts.notify, secret: opts.notifySecret || undefined, on: opts.notifyOn } : undefined;
}

export function notificationOf(command: Notification['command'], r: RunReport): Notification {
  return {
    source: 'edgeform',
    command,
    stack: r.stack,
    outcome: r.outcome,
    time: r.time,
    dry_run: r.dryRun,
    applied: r.applied,
    drift_found: r.drift,
    drift: r.driftAddresses,
    api_calls: r.apiCalls,
    duration_ms: r.durationMs,
    errors: r.errors,
  };
}

/** Sends when a target is set; an undelivered notification is a warning on stderr. */
export async function notify(io: Io, target: NotifyTarget | undefined, n: Notification) {
  if (!target) return;
  const problem = await sendNotification(target, n);
  if (problem) io.err(`${io.errStyle.yellow('Warning:')} ${problem}\n`);
}

/** What an apply run got to, for its notification. */
export interface ApplySeen {
  started: number;
  plan?: Plan;
  result?: ExecuteResult;
  /** The error that ended the run, in the words the user saw. */
  error?: string;
}

/** apply's outcome: failure on any error or exit code but 0; drift_repaired when the plan put back changes made outside edgeform. */
export function applyNotification(stack: string, seen: ApplySeen, code: number, apiCalls: number): Notification {
  const drifted = (seen.plan?.changes ?? []).filter((c) => !isNoop(c) && (c.drift || c.deletedOutside)).map((c) => c.address);
  const errors = [...(seen.error ? [seen.error] : []), ...(seen.result?.failures ?? []).map((f) => `${f.address}: ${f.message}`)];
  if (code !== 0 && !errors.length) errors.push(seen.result?.notDone?.length ? `interrupted; not done: ${seen.result.notDone.join(', ')}` : `apply exited ${code}`);
  return {
    source: 'edgeform',
    command: 'apply',
    stack: seen.plan?.stack ?? stack,
    outcome: code !== 0 || errors.length ? 'failure' : drifted.length ? 'drift_repaired' : 'success',
    time: new Date(seen.started).toISOString(),
    dry_run: false,
    applied: summarize(seen.result?.done ?? []),
    drift_found: drifted.length,
    drift: drifted,
    api_calls: apiCalls,
    duration_ms: Date.now() - seen.started,
    errors,
  };
}
