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
}

export type ToWorker =
  | { t: 'tunnels'; snap: TunnelSnapshot }
  | { t: 'changed'; seq: number; ids?: string[] }
  | { t: 'drain'; deadlineMs: number };

export type ToPrimary =
  | { t: 'ready'; listeners: string[]; agentTcpPorts: number[] }
  | { t: 'applied'; seq: number }
  /** Whole log lines of the worker, for the primary to write. */
  | { t: 'log'; text: string }
  | { t: 'failed'; message: string; code?: string; syscall?: string; address?: string; port?: number };

/** The gateway's tunnel maps, read as they are (they are private to it: the ingress's look-ups are its interface). */
export function tunnelSnapshot(gateway: Gateway): TunnelSnapshot {
  const g = gateway as unknown as {
    tunnels: Map<string, string>; labeled: Map<string, Record<string, string>>; endpointHosts: Map<string, string>; tlsEndpoints: Set<string>; endpointRoutes: Map<string, FullDoc>; endpointProtos: Map<string, string>;
  };
  return {
    live: [...g.tunnels.keys()].filter((id) => gateway.tunnelLive(id)),
    labeled: [...g.labeled],
    endpoints: [...g.endpointHosts],
    tls: [...g.tlsEndpoints],
    routes: [...g.endpointRoutes],
    protos: [...g.endpointProtos],
  };
}
