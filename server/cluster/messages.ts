// What the primary and the ingress workers tell each other (node:cluster IPC).
import type { Gateway } from '../gateway/gateway.js';
import type { FullDoc } from '../ingress/types.js';

/** The tunnels online at the primary, as the ingress looks them up (gateway.ts). */
export interface TunnelSnapshot {
  /** Every tunnel held (tunnelLive). */
  live: string[];
  labeled: [string, Record<string, string>][];
  /** Endpoint hostnames (and `tcp:PORT`) to their tunnel. */
  endpoints: [string, string][];
  tls: string[];
  routes: [string, FullDoc][];
  /** The proto (http, https, tls, tcp) of each endpoint's tunnel: a plain-HTTP listener serves http ones only. */
  protos: [string, string][];
  /** Pools (issue 36): endpoints with pooling by hostname or `tcp:PORT`, internal endpoints by `internal:URL`, to their members. */
  pools?: [string, string[]][];
  /**
   * Tunnels whose requests go over pooled connections, with the path prefix of their
   * forwards_to (gateway.pooledPrefix): a worker keeps its own pool of each, TCP streams
   * through the primary to the agent, as the primary keeps its own (gateway/relay-pool.ts).
   */
  pooled: [string, string][];
}

export type ToWorker =
  | { t: 'tunnels'; snap: TunnelSnapshot }
  | { t: 'changed'; seq: number; ids?: string[] }
  | { t: 'drain'; deadlineMs: number }
  /** The worker's ingress metrics, for the primary's GET /metrics (answered with `metrics`). */
  | { t: 'metrics'; id: number };

export type ToPrimary =
  | { t: 'ready'; listeners: string[]; agentTcpPorts: number[] }
  | { t: 'applied'; seq: number }
  /** The worker's ingress metrics (prom-client's getMetricsAsJSON), for the primary's GET /metrics. */
  | { t: 'metrics'; id: number; metrics: unknown[] }
  /** Whole log lines of the worker, for the primary to write. */
  | { t: 'log'; text: string }
  | { t: 'failed'; message: string; code?: string; syscall?: string; address?: string; port?: number };

/** The tunnels the primary's gateway reaches (its own and, with peers, the other instances'), as the ingress looks them up. */
export function tunnelSnapshot(gateway: Gateway): TunnelSnapshot {
  const snap: TunnelSnapshot = { live: [], labeled: [], endpoints: [], tls: [], routes: [], protos: [], pooled: [] };
  for (const t of gateway.reachableTunnels()) {
    snap.live.push(t.id);
    if (t.labels) snap.labeled.push([t.id, { ...t.labels }]);
    if (t.host !== undefined) snap.endpoints.push([t.host, t.id]);
    if (t.tls) snap.tls.push(t.id);
    if (t.route) snap.routes.push([t.id, t.route]);
    if (t.proto) snap.protos.push([t.id, t.proto]);
    if (t.pool !== undefined) {
      const at = (snap.pools ??= []).find(([k]) => k === t.pool);
      if (at) at[1].push(t.id);
      else snap.pools.push([t.pool, [t.id]]);
    }
    const prefix = gateway.pooledPrefix(t.id);
    if (prefix !== undefined) snap.pooled.push([t.id, prefix]);
  }
  return snap;
}
