// `--notify URL`, `--notify-secret` and `--notify-on` of `reconcile` and `apply`.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { NOTIFY_OUTCOMES, NOTIFY_SIGNATURE_HEADER, sendNotification, type Notification, type NotifyTarget } from '../reconciler/notify.js';
import type { Outcome, RunReport } from '../reconciler/continuous/run.js';
import type { Io } from './reconcile.js';

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
