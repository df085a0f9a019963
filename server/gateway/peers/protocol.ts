// The channel between holders of tunnels (docs/agents.md, "Several instances"): HTTP/2 over
// mutual TLS (credentials.ts). One connection per pair of instances, opened by the one that
// needs the other's tunnels; on it:
//
//   GET  /_edgeform/peer/watch  the holder's tunnels: one JSON line (a Snapshot) at once and
//                               another after every change, for as long as the stream is open
//   POST /_edgeform/peer/http   a relayed HTTP request: `edgeform-peer-tunnel` names the tunnel,
//                               `edgeform-peer-request` the request (PeerRequest, JSON); the
//                               stream's body is the request's, its answer the agent's (head and
//                               body as the agent sent them)
//   POST /_edgeform/peer/tcp    a raw stream to the tunnel's upstream (TCP and TLS endpoints,
//                               WebSockets): 200 once the agent reached it, then bytes both ways
//
// A tunnel the holder no longer has is refused with RST_STREAM REFUSED_STREAM (the caller's
// relay sees a stream closed before its answer, and may try another tunnel). The caller's
// client key (`edgeform-peer-client`) travels with each stream, so the holder paces an
// agent's cancels per client as it does for its own ingress.
//
// The same protocol is what another holder of tunnels (a worker process, issue 34) would
// speak: a holder serves serveHolder() (server.ts) over any HTTP/2 session, a caller uses
// PeerLink (link.ts) over any.
import type { FullDoc } from '../../ingress/types.js';

export const PEER_PATHS = { watch: '/_edgeform/peer/watch', http: '/_edgeform/peer/http', tcp: '/_edgeform/peer/tcp' } as const;
export const PEER_HEADERS = { tunnel: 'edgeform-peer-tunnel', request: 'edgeform-peer-request', client: 'edgeform-peer-client' } as const;

/** A tunnel as its holder shows it to the others: what the ingress chooses by. */
export interface SharedTunnel {
  id: string;
  /** A labeled tunnel's labels (tunnel-group backends). */
  labels?: Readonly<Record<string, string>>;
  /** An endpoint's key: its hostname (http, https, tls) or `tcp:PORT`. */
  host?: string;
  /** A pool member's (or an internal endpoint's) pool: its hostname, `tcp:PORT`, or `internal:URL` (issue 36); such a tunnel has no `host`. */
  pool?: string;
  /** A tls endpoint (its connections pass through, still encrypted). */
  tls?: boolean;
  /** An endpoint's proto (http, https, tls, tcp): a plain-HTTP listener serves http ones only. */
  proto?: string;
  /** The route modules the endpoint runs (on the instance the client reached). */
  route?: FullDoc;
}

export interface Snapshot { tunnels: SharedTunnel[] }

export interface PeerRequest {
  method: string;
  path: string;
  headers?: Record<string, string | string[] | undefined>;
}

/** What a holder offers: its own tunnels, never another's (so a request crosses at most one hop). */
export interface LocalHolder {
  sharedTunnels(): SharedTunnel[];
  /** Calls `fn` after each change of the tunnels held here; returns the unsubscribe. */
  onTunnelsChanged(fn: () => void): () => void;
  openLocalStream(tunnelId: string, req: PeerRequest & { endStream?: boolean }, client: string): import('node:http2').ClientHttp2Stream;
  openLocalTcp(tunnelId: string, client: string): import('node:http2').ClientHttp2Stream;
}

/** A snapshot line is at most this long; a longer one ends the watch (the caller reconnects). */
export const MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;
