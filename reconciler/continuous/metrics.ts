// What continuous reconcile serves on --metrics-address: GET /healthz (JSON: the loop is up,
// and its last run) and GET /metrics (Prometheus text, prom-client), plus any routes the
// caller adds (the server-event receiver). Its own registry: no process-global state.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RunReport } from './run.js';

export type Route = (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => void | Promise<void>;

export class ReconcileMetrics {
  readonly registry = new Registry();
  private last?: RunReport;
  private readonly lastRun = new Gauge({ name: 'edgeform_reconcile_last_run_timestamp_seconds', help: 'When the last run started (Unix time)', labelNames: ['stack'], registers: [this.registry] });
  private readonly lastSuccess = new Gauge({ name: 'edgeform_reconcile_last_run_success', help: '1 when the last run succeeded (drift repaired or found included), 0 when it failed', labelNames: ['stack'], registers: [this.registry] });
  private readonly runs = new Counter({ name: 'edgeform_reconcile_runs_total', help: 'Runs by outcome (success, failure, drift_repaired, drift_found)', labelNames: ['stack', 'outcome'], registers: [this.registry] });
  private readonly drift = new Gauge({ name: 'edgeform_reconcile_drift_resources', help: 'Resources the last run found changed outside edgeform', labelNames: ['stack'], registers: [this.registry] });
  private readonly managed = new Gauge({ name: 'edgeform_reconcile_managed_resources', help: 'Resources the manifests declare, as of the last run that planned', labelNames: ['stack'], registers: [this.registry] });
  private readonly apiCalls = new Counter({ name: 'edgeform_reconcile_api_calls_total', help: 'API calls made by all runs', labelNames: ['stack'], registers: [this.registry] });
  private readonly lastApiCalls = new Gauge({ name: 'edgeform_reconcile_last_run_api_calls', help: 'API calls the last run made', labelNames: ['stack'], registers: [this.registry] });
  private readonly changes = new Counter({ name: 'edgeform_reconcile_changes_total', help: 'Changes carried out by all runs', labelNames: ['stack'], registers: [this.registry] });
  private readonly duration = new Histogram({
    name: 'edgeform_reconcile_run_duration_seconds',
    help: 'How long runs take',
    labelNames: ['stack'],
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  /** The server-event subscription (bin/continuous.ts): off, pending (not made yet: the server down), subscribed, lost (the server came back without it; being made again), refused. */
  private subscriptionState = 'off';
  private readonly subscribed = new Gauge({ name: 'edgeform_reconcile_events_subscribed', help: '1 while the subscription to the server\'s change events is in place, 0 while it is not (not made yet, lost with the server\'s database, refused, or turned off)', labelNames: ['stack', 'state'], registers: [this.registry] });
  private readonly subscriptions = new Counter({ name: 'edgeform_reconcile_events_subscriptions_total', help: 'Subscriptions to the server\'s change events made (more than 1: made again after the server lost one)', labelNames: ['stack'], registers: [this.registry] });

  subscription(state: 'off' | 'pending' | 'subscribed' | 'lost' | 'refused') {
    this.subscriptionState = state;
    this.subscribed.reset();
    this.subscribed.set({ stack: this.stack, state }, state === 'subscribed' ? 1 : 0);
    if (state === 'subscribed') this.subscriptions.inc({ stack: this.stack });
  }

  constructor(private readonly stack: string) {
    // Present (at 0) before the first run, so a dashboard's query has a series.
    this.runs.inc({ stack, outcome: 'success' }, 0);
    this.apiCalls.inc({ stack }, 0);
    this.changes.inc({ stack }, 0);
    this.subscriptions.inc({ stack }, 0);
  }

  record(r: RunReport) {
    const stack = this.stack;
    this.last = r;
    this.lastRun.set({ stack }, Date.parse(r.time) / 1000);
    this.lastSuccess.set({ stack }, r.outcome === 'failure' ? 0 : 1);
    this.runs.inc({ stack, outcome: r.outcome });
    this.drift.set({ stack }, r.drift);
    // A run that failed before planning knows nothing of what is managed: the last figure stays.
    if (r.managed || r.outcome !== 'failure') this.managed.set({ stack }, r.managed);
    this.apiCalls.inc({ stack }, r.apiCalls);
    this.lastApiCalls.set({ stack }, r.apiCalls);
    this.changes.inc({ stack }, r.applied.add + r.applied.change + r.applied.destroy);
    this.duration.observe({ stack }, r.durationMs / 1000);
  }

  health() {
    const r = this.last;
    return {
      status: 'ok',
      stack: this.stack,
      events: this.subscriptionState,
      last_run: r ? { time: r.time, outcome: r.outcome, drift_found: r.drift, errors: r.errors } : null,
    };
  }
}

/** Parses HOST:PORT ([::1]:9100 for IPv6); a usage error's sentence when it is not one. */
export function parseAddress(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new Error('It must be HOST:PORT, such as 127.0.0.1:9100 or 0.0.0.0:9100.');
  return { host: m[1] ?? m[2], port };
}

export interface MetricsServer {
  /** `host:port` actually listened on (port 0 picks one). */
  address: string;
  close(): Promise<void>;
}

const MAX_BODY = 1024 * 1024;

export async function serveMetrics(metrics: ReconcileMetrics, where: { host: string; port: number }, routes: Record<string, Route> = {}): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => void answer(req, Buffer.concat(chunks), res));
  });
  const answer = async (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => {
    const p = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, text: string) => res.writeHead(status, { 'content-type': type }).end(text);
    try {
      if (p === '/healthz' && (req.method === 'GET' || req.method === 'HEAD')) return send(200, 'application/json', JSON.stringify(metrics.health()));
      if (p === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) return send(200, metrics.registry.contentType, await metrics.registry.metrics());
      const route = routes[p];
      if (route) return await route(req, body, res);
      send(404, 'application/json', JSON.stringify({ error: `no such path ${p}: this is edgeform reconcile, serving GET /healthz and GET /metrics` }));
    } catch (e) {
      if (!res.headersSent) send(500, 'application/json', JSON.stringify({ error: (e as Error).message }));
    }
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(where.port, where.host, () => resolve());
  });
  const a = server.address() as AddressInfo;
  return {
    address: `${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
