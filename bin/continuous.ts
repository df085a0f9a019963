// `edgeform reconcile`: plan-and-apply in a loop, as a long-lived service (docs/gitops.md).
// Output: one JSON line per run on stdout (and a few lines about the service itself).
// Exit codes: 0 stopped by SIGTERM or SIGINT (the run in progress finished first), or
// --once and the run succeeded (drift repaired or found included); 1 --once and the run
// failed, or the service could not start (the metrics address in use); 2 usage error.
import { Command, Option } from 'commander';
import { logLine as serverLogLine } from '../server/log-lines.js';
import { commandLine, lockOptions, parseDuration } from './lock.js';
import { explain, manifestOption, needsNamedStack, parallelismOption, targetOf, targetOptions, UsageError, type Io } from './reconcile.js';
import { notificationOf, notifyOptions, notifyTargetOf } from './notify.js';
import { reconcileOnce, type RunReport } from '../reconciler/continuous/run.js';
import { ReconcileLoop, type Trigger } from '../reconciler/continuous/loop.js';
import { parseAddress, ReconcileMetrics, serveMetrics, type MetricsServer } from '../reconciler/continuous/metrics.js';
import { sendNotification } from '../reconciler/notify.js';
import { EVENTS_PATH, subscribe, type EventFeed } from '../reconciler/continuous/events.js';
import { clientFor } from '../reconciler/session.js';
import { ApiClientError } from '../provider/client/index.js';
import type { Route } from '../reconciler/continuous/metrics.js';

const HELP_AFTER = `
Each run reads the manifests again, takes the stack lock, plans, and applies a plan that has
no problems (a plan with problems is never applied). Runs start at once, every --interval,
and at once when a file under -f changes. After failed runs the wait doubles, up to the
larger of the interval and 5 minutes. --dry-run only reports drift, applying nothing.

Each run writes one JSON line on stdout: outcome (success, failure, drift_repaired,
drift_found), changes_made, applied, planned, drift_found, drift, managed, api_calls,
duration_ms, errors, trigger.

With --metrics-address, reconcile subscribes to the server's change events (an event
destination pointed at its POST /events, and a subscription to every managed kind's
created/updated/deleted events), so a change made by hand starts a run within seconds;
the interval is the fallback. --no-events turns this off. The subscription is checked after
every run and every 30 s (or the interval, when shorter); when the server has lost it (it
came back on an empty or restored database) it is made again, and a run follows.

After a failed run while the server does not answer, its /healthz is asked every second,
and a run starts as soon as it answers (not after the backoff).

SIGTERM or SIGINT: the run in progress finishes, then the command exits 0 (a second signal
exits at once).

Exit codes: 0 stopped by a signal, or --once and the run succeeded; 1 --once and the run
failed, or the service could not start; 2 usage error.

Examples:
  edgeform reconcile -f manifests/ --stack web --interval 60s --metrics-address 127.0.0.1:9100
  edgeform reconcile -f manifests/ --stack web --dry-run --notify https://hooks.example.com/edgeform
`;

/** How often, at most, the event subscription is checked between runs (the interval when shorter). */
const FEED_CHECK_MS = 30_000;

/** One JSON log line, made as `edgeform serve` makes them (server/log-lines.ts). */
const logLine = (io: Io, level: 'info' | 'warn' | 'error', msg: string, extra: Record<string, unknown> = {}) =>
  io.out(`${serverLogLine({ level, msg, ...extra })}\n`);

function runLine(r: RunReport, trigger: Trigger) {
  return {
    stack: r.stack,
    trigger,
    outcome: r.outcome,
    dry_run: r.dryRun,
    changes_made: r.applied.add + r.applied.change + r.applied.destroy,
    applied: r.applied,
    planned: r.planned,
    drift_found: r.drift,
    drift: r.driftAddresses,
    managed: r.managed,
    api_calls: r.apiCalls,
    duration_ms: r.durationMs,
    errors: r.errors,
    ...(r.warnings.length ? { warnings: r.warnings } : {}),
  };
}

export function continuousCommand(setCode: (code: number) => void, io: () => Io): Command {
  const cmd = notifyOptions(lockOptions(parallelismOption(targetOptions(manifestOption(new Command('reconcile'))))))
    .description('Reconcile continuously: plan and apply on an interval and on every manifest change, repairing drift (a long-lived service).')
    .addOption(new Option('--interval <duration>', 'time between runs (30s, 5m, 1h)').default(60_000, '60s').argParser(parseDuration))
    .option('--prune', 'also delete resources this stack manages that are no longer declared')
    .option('--once', 'one run, then exit (0 success, 1 failure)')
    .option('--dry-run', 'only report drift and pending changes; apply nothing')
    .addOption(new Option('--metrics-address <host:port>', 'serve GET /healthz and Prometheus GET /metrics here (such as 127.0.0.1:9100), and POST /events, the server\'s change events').env('EDGEFORM_METRICS_ADDRESS'))
    .addOption(new Option('--events-url <url>', 'where the server reaches this process\'s POST /events (default: http://METRICS-ADDRESS/events when --metrics-address names a host)').env('EDGEFORM_EVENTS_URL'))
    .option('--no-events', 'do not subscribe to the server\'s change events; drift is found on the interval only')
    .addHelpText('after', HELP_AFTER)
    .action(async (opts: Record<string, any>, self: Command) => {
      const out = io();
      try {
        setCode(await reconcileService(out, opts, commandLine(self)));
      } catch (e) {
        out.err(`${out.errStyle.red('Error:')} ${explain(e, opts.apiUrl)}\n`);
        setCode(e instanceof UsageError ? 2 : 1);
      }
    });
  return cmd;
}

async function reconcileService(out: Io, opts: Record<string, any>, command: string): Promise<number> {
  const target = targetOf(opts);
  if (opts.prune) needsNamedStack(opts, 'reconcile --prune');
  if (!opts.file?.length && !opts.cdktf?.length) throw new UsageError('no manifests: give -f DIR (a directory of *.yaml files, watched for changes) or --cdktf DIR');
  if (opts.interval < 1000) throw new UsageError('--interval must be at least 1s');
  let address: { host: string; port: number } | undefined;
  if (opts.metricsAddress) {
    try {
      address = parseAddress(opts.metricsAddress);
    } catch (e) {
      throw new UsageError(`--metrics-address ${JSON.stringify(opts.metricsAddress)}: ${(e as Error).message}`);
    }
  }
  const notifyTarget = notifyTargetOf(opts);
  const metrics = new ReconcileMetrics(target.stack);
  let failedOnce = false;
  const fingerprintCache = new Map<string, string>();
  const runOnce = async (trigger: Trigger) => {
    const report = await reconcileOnce({
      target,
      files: opts.file ?? [],
      cdktf: opts.cdktf ?? [],
      fileOptions: { exclude: opts.exclude },
      prune: !!opts.prune,
      dryRun: !!opts.dryRun,
      lock: opts.lock !== false,
      lockTimeoutMs: opts.lockTimeout ?? 0,
      command,
      fingerprintCache,
      explain: (e) => explain(e, target.apiUrl),
    });
    metrics.record(report);
    logLine(out, report.outcome === 'failure' ? 'error' : 'info', 'reconcile run', runLine(report, trigger));
    if (notifyTarget) {
      const problem = await sendNotification(notifyTarget, notificationOf('reconcile', report));
      if (problem) logLine(out, 'warn', problem);
    }
    failedOnce = report.outcome === 'failure';
    return { failed: failedOnce };
  };

  if (opts.once) {
    await runOnce('start');
    return failedOnce ? 1 : 0;
  }

  let served: MetricsServer | undefined;
  const routes: Record<string, Route> = {};
  if (address) {
    try {
      served = await serveMetrics(metrics, address, routes);
    } catch (e) {
      throw new Error(`cannot serve metrics on ${opts.metricsAddress}: ${(e as Error).message}`);
    }
  }
  const loop = new ReconcileLoop({
    intervalMs: opts.interval,
    watch: [...(opts.file ?? []), ...(opts.cdktf ?? [])],
    // A subscription that could not be made at start (the server down) is tried again after each run that reached the server.
    run: async (trigger) => {
      const r = await runOnce(trigger);
      if (!r.failed) await ensureFeed();
      return r;
    },
    onWatchError: (m) => logLine(out, 'warn', m),
    // After a failed run: a run as soon as the server answers again, not after the backoff.
    probe: async () => {
      try {
        return (await fetch(`${target.apiUrl.replace(/\/+$/, '')}/healthz`, { signal: AbortSignal.timeout(2000) })).ok;
      } catch {
        return false;
      }
    },
  });
  logLine(out, 'info', 'reconcile started', {
    stack: target.stack,
    api_url: target.apiUrl,
    interval_ms: opts.interval,
    dry_run: !!opts.dryRun,
    prune: !!opts.prune,
    ...(served ? { metrics_address: served.address } : {}),
  });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      logLine(out, 'warn', `second ${signal}: exiting at once`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    logLine(out, 'info', `received ${signal}: ${loop.busy ? 'finishing the run in progress, then exiting' : 'exiting'}`);
    void loop.stop();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const eventsClient = clientFor({ ...target, parallelism: 1 });
  let feed: EventFeed | undefined;
  const eventsUrl = opts.events === false ? undefined : (opts.eventsUrl ?? (served && !/^(0\.0\.0\.0|\[::\]):/.test(served.address) ? `http://${served.address}${EVENTS_PATH}` : undefined));
  let warned = false;
  let refused = false;
  metrics.subscription(eventsUrl && served ? 'pending' : 'off');
  async function ensureFeed() {
    if (refused || !eventsUrl || !served) return;
    if (feed && !(await feedLost(feed))) return;
    try {
      feed = await subscribe(eventsClient, { stack: target.stack, url: eventsUrl, onEvent: () => loop.trigger('event') });
      routes[EVENTS_PATH] = feed.route;
      metrics.subscription('subscribed');
      logLine(out, 'info', 'subscribed to the server\'s change events', { events_url: eventsUrl, destination_id: feed.destinationId });
    } catch (e) {
      // The server said no (no permission, no event destinations): asking every run would not change that.
      refused = e instanceof ApiClientError && e.status !== 503 && e.status < 500;
      metrics.subscription(refused ? 'refused' : 'pending');
      if (!warned || refused) logLine(out, 'warn', `cannot subscribe to the server's change events (${explain(e, target.apiUrl)}); drift is found on the interval${refused ? '' : ' until a later run can subscribe'}`);
      warned = true;
    }
  }
  /**
   * Whether the server no longer has the feed's subscription or destination: it came back on
   * an empty or restored database. Checked after every run that reached the server; a lost
   * feed is made again at once (the interval alone would find drift much later).
   */
  async function feedLost(f: EventFeed): Promise<boolean> {
    try {
      await eventsClient.call('GET', `/event_subscriptions/${f.subscriptionId}`);
      await eventsClient.call('GET', `/event_destinations/${f.destinationId}`);
      return false;
    } catch (e) {
      if (!(e instanceof ApiClientError) || e.status !== 404) return false;
      feed = undefined;
      delete routes[EVENTS_PATH];
      metrics.subscription('lost');
      logLine(out, 'warn', 'the server no longer has this reconciler\'s event subscription (it came back on an empty or restored database); subscribing again', { events_url: eventsUrl });
      return true;
    }
  }
  await ensureFeed();
  if (opts.eventsUrl && !served) logLine(out, 'warn', '--events-url needs --metrics-address, where the events are received; drift is found on the interval only');
  // Between runs too (a long --interval, a server restarted on another database between two
  // runs): the feed is checked every FEED_CHECK_MS at most, and a lost one is made again,
  // followed by a run (what the server lost may include this stack's resources).
  let checking = false;
  const checker = setInterval(async () => {
    if (!feed || checking || loop.busy) return;
    checking = true;
    try {
      if (await feedLost(feed)) {
        await ensureFeed();
        loop.trigger('retry');
      }
    } finally {
      checking = false;
    }
  }, Math.min(opts.interval, FEED_CHECK_MS));
  checker.unref();
  try {
    loop.start();
    await loop.done;
  } finally {
    clearInterval(checker);
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    const problem = await feed?.close();
    if (problem) logLine(out, 'warn', problem);
    await eventsClient.close();
    await served?.close();
  }
  logLine(out, 'info', 'reconcile stopped', { stack: target.stack });
  return 0;
}
