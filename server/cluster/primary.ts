// `edgeform serve --workers N` (N > 1), the primary's side: the API, the database writer, the
// agents' gateway and the event worker stay here; N processes (node:cluster, sharing each
// ingress listening socket) serve the ingress listeners. What the ingress must see as one
// server is kept one here:
//  - the routing table: a committed write's ids go to every worker, and its API answer waits
//    until each has applied them (as ingress.changed() on one process);
//  - agents' tunnels: what tunnels are online goes to every worker as it changes, and a worker
//    reaches a tunnel through the holder channel (relay-channel.ts): one in-memory hop, over
//    pooled upstream connections of its own (its share of --agent-relay-pool) when it can;
//  - GET /metrics: the workers' ingress counters are asked for and added up (Metrics.othersOf);
//  - rate limits (traffic policies' rate-limit) and circuit breakers: one set, here (shared-windows.ts);
//  - per-client bounds: each worker holds 1/N of `--ingress-connections-per-client` and
//    `--ingress-relays-per-client` (rounded up), so one client spreading its connections over
//    the workers gets its share, not N times it;
//  - SIGTERM: close() drains every worker (each stops accepting, finishes what is in flight
//    within the drain deadline, and exits) before the gateway and the database close.
import cluster, { type Worker } from 'node:cluster';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Gateway } from '../gateway/gateway.js';
import type { RunningIngress } from '../ingress/start.js';
import type { IngressListenerSpec } from '../ingress/types.js';
import type { Metrics, MetricJson } from '../http/metrics.js';
import { flushLogLines } from '../log-lines.js';
import { serveHolder } from './relay-channel.js';
import { serveWindows } from './shared-windows.js';
import { tunnelSnapshot, type ToPrimary, type ToWorker } from './messages.js';

export interface ClusterOptions {
  workers: number;
  listeners: IngressListenerSpec[];
  gateway: Gateway;
  log: (fields: Record<string, unknown>) => void;
  /** Where the workers' log lines are written (whole lines; default this process's standard output, after its own pending lines). */
  writeText?: (text: string) => void;
  /** The server's metrics: GET /metrics adds up the workers' ingress counters (Metrics.othersOf). */
  metrics?: Metrics;
  /** How long a worker may take to start (read the table, listen) before the start fails. */
  startTimeoutMs?: number;
}

/** How long GET /metrics waits for a worker's counters; one that has not answered by then is left out of that answer (and logged). */
export const METRICS_WAIT_MS = 2000;

const writeText = (text: string) => {
  flushLogLines();
  process.stdout.write(text);
};

/** The ingress of this process (its table, CA, deps; no listeners) with N workers serving the listeners. */
export async function startWorkers(local: RunningIngress, o: ClusterOptions): Promise<RunningIngress> {
  // A folder only this user can enter (mkdtemp: 0700) for the channel's socket and the pipes.
  const run = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-workers-'));
  const holder = await serveHolder(path.join(run, 'holder.sock'), o.gateway, o.log);
  const windows = await serveWindows(path.join(run, 'windows'), o.workers);
  const workers: Worker[] = [];
  const ready = new Map<number, Extract<ToPrimary, { t: 'ready' }>>();
  let seq = 0;
  const waiting = new Map<number, { left: Set<number>; resolve: () => void }>();
  let stopping = false;
  const send = (w: Worker, m: ToWorker) => { if (w.isConnected()) w.send(m); };

  // What tunnels are online, to every worker whenever it changes (one message per change burst).
  let queued = false;
  const pushTunnels = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      const snap = tunnelSnapshot(o.gateway);
      for (const w of workers) send(w, { t: 'tunnels', snap });
    });
  };
  const unwatch = o.gateway.onReachableTunnelsChanged(pushTunnels);

  const applied = (id: number, s: number) => {
    const wait = waiting.get(s);
    if (!wait) return;
    wait.left.delete(id);
    if (!wait.left.size) {
      waiting.delete(s);
      wait.resolve();
    }
  };
  /** A worker that exited no longer holds up any write's answer. */
  const gone = (id: number) => {
    for (const s of [...waiting.keys()]) applied(id, s);
    for (const ask of asked.values()) ask.answered(id, undefined);
  };

  // GET /metrics: each worker's ingress counters, asked for when the metrics are read.
  let metricsSeq = 0;
  const asked = new Map<number, { answered: (worker: number, metrics: MetricJson[] | undefined) => void }>();
  const workerMetrics = () => new Promise<MetricJson[][]>((resolve) => {
    const id = ++metricsSeq;
    const live = workers.filter((w) => w.isConnected() && ready.has(w.id));
    const left = new Set(live.map((w) => w.id));
    const got: MetricJson[][] = [];
    const finish = () => {
      clearTimeout(timer);
      asked.delete(id);
      resolve(got);
    };
    const timer = setTimeout(() => {
      o.log({ level: 'warn', msg: `GET /metrics: ${left.size} ingress worker(s) did not send their counters within ${METRICS_WAIT_MS} ms; their counts are missing from this answer`, workers: workers.filter((w) => left.has(w.id)).map((w) => w.process.pid) });
      finish();
    }, METRICS_WAIT_MS);
    asked.set(id, {
      answered(worker, metrics) {
        if (!left.delete(worker)) return;
        if (metrics) got.push(metrics);
        if (!left.size) finish();
      },
    });
    if (!left.size) return finish();
    for (const w of live) send(w, { t: 'metrics', id });
  });

  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the ingress workers did not start within ${(o.startTimeoutMs ?? 120_000) / 1000} s`)), o.startTimeoutMs ?? 120_000);
    for (let i = 0; i < o.workers; i++) {
      const w = cluster.fork({ EDGEFORM_WORKER_INDEX: String(i), EDGEFORM_WORKER_HOLDER: path.join(run, 'holder.sock'), EDGEFORM_WORKER_WINDOWS: windows.pathFor(i), EDGEFORM_WORKER_COUNT: String(o.workers) });
      workers.push(w);
      w.on('error', () => {});
      w.on('message', (m: ToPrimary) => {
        if (m.t === 'ready') {
          ready.set(w.id, m);
          send(w, { t: 'tunnels', snap: tunnelSnapshot(o.gateway) });
          if (ready.size === o.workers) {
            clearTimeout(timer);
            resolve();
          }
        } else if (m.t === 'applied') applied(w.id, m.seq);
        else if (m.t === 'metrics') asked.get(m.id)?.answered(w.id, m.metrics as MetricJson[]);
        else if (m.t === 'log') (o.writeText ?? writeText)(m.text);
        else if (m.t === 'failed') {
          clearTimeout(timer);
          // A listener's failure keeps its code, address and port (a worker's bind is the listen it stands for).
          const err = Object.assign(new Error(`ingress worker ${i}: ${m.message}`), { code: m.code, syscall: m.syscall === 'bind' ? 'listen' : m.syscall, address: m.address, port: m.port });
          reject(err);
        }
      });
      w.on('exit', (code, signal) => {
        gone(w.id);
        if (!stopping) {
          o.log({ level: 'error', msg: `ingress worker ${i} (pid ${w.process.pid}) exited (${signal ?? code}) while the server runs`, worker: w.process.pid });
          if (!ready.has(w.id)) {
            clearTimeout(timer);
            reject(new Error(`ingress worker ${i} exited (${signal ?? code}) before it listened`));
          }
        }
      });
    }
  }).catch(async (e) => {
    stopping = true;
    for (const w of workers) w.process.kill('SIGKILL');
    await holder.close();
    windows.close();
    fs.rmSync(run, { recursive: true, force: true });
    throw e;
  });

  if (o.metrics) o.metrics.othersOf = workerMetrics;
  const first = ready.values().next().value!;
  const pids = workers.map((w) => w.process.pid!);
  return {
    ...local,
    listeners: o.listeners.map((spec, i) => ({ ...spec, address: first.listeners[i] })),
    agentTcpPorts: first.agentTcpPorts,
    workers: pids,
    async changed(ids) {
      await local.changed(ids);
      const live = workers.filter((w) => w.isConnected() && ready.has(w.id));
      if (!live.length) return;
      const s = ++seq;
      const done = new Promise<void>((resolve) => waiting.set(s, { left: new Set(live.map((w) => w.id)), resolve }));
      for (const w of live) send(w, { t: 'changed', seq: s, ids: ids ? [...ids] : undefined });
      await done;
    },
    async drain(deadlineMs) {
      stopping = true;
      if (o.metrics?.othersOf === workerMetrics) o.metrics.othersOf = undefined;
      unwatch();
      await Promise.all(workers.map((w) => new Promise<void>((resolve) => {
        if (w.isDead()) return resolve();
        w.once('exit', () => resolve());
        send(w, { t: 'drain', deadlineMs });
        // A worker that does not finish within the deadline (and a margin) is stopped.
        setTimeout(() => { if (!w.isDead()) w.process.kill('SIGKILL'); }, deadlineMs + 5000).unref();
      })));
      await holder.close();
      windows.close();
      fs.rmSync(run, { recursive: true, force: true });
      await local.drain(deadlineMs);
    },
  };
}
