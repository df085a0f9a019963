// The wire contract between `edgeform agent` and the server's gateway. The agent dials the
// API port with an HTTP/1.1 Upgrade; after 101 the socket carries HTTP/2 in reverse: the
// server is the HTTP/2 client and opens every stream (control requests below, relayed
// requests, CONNECT streams for raw TCP). Both sides import this file; the agent's bundle
// carries it, so it depends on zod only.
import { z } from 'zod';

export const AGENT_PATH = '/_edgeform/agent';
export const UPGRADE_TOKEN = 'edgeform-agent/2';
export const TRANSPORT = 'service/v2';

/** Control requests the server sends to the agent (POST, JSON bodies). */
export const CONTROL = {
  hello: '/_edgeform/hello',
  bound: '/_edgeform/bound',
  command: '/_edgeform/command',
  bundle: '/_edgeform/bundle',
  closing: '/_edgeform/closing',
} as const;

/** Header naming the tunnel a relayed stream is for. */
export const TUNNEL_HEADER = 'edgeform-tunnel-id';

/**
 * Connection-specific headers (RFC 9110 7.6.1, and those HTTP/2 forbids): no hop passes them
 * on. The edge, the server's relayed streams and pooled connections, and the agent each drop
 * these, with what else their hop refuses.
 */
export const CONNECTION_HEADERS = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'http2-settings'] as const;

/** On the agent's own 502 (it could not reach forwards_to; the value is the socket error's code), apart from the upstream's 502s. */
export const AGENT_ERROR_HEADER = 'edgeform-agent-error';

/** Largest control body either side reads; anything bigger is refused, not buffered. */
export const MAX_CONTROL_BODY = 256 * 1024;

export const PROTOS = ['http', 'https', 'tcp', 'tls'] as const;

/** Where a `forwards_to` sends HTTP (a URL, or host:port for http): its origin, path prefix and host. */
export interface HttpUpstream { origin: string; prefix: string; host: string; /** http: (not https:), so plain HTTP/1.1 over a TCP connection reaches it. */ plain: boolean }
export function httpUpstreamOf(forwardsTo: string): HttpUpstream {
  const base = /^[a-z]+:\/\//i.test(forwardsTo) ? new URL(forwardsTo) : new URL(`http://${forwardsTo}`);
  return { origin: base.origin, prefix: base.pathname === '/' ? '' : base.pathname.replace(/\/$/, ''), host: base.host, plain: base.protocol === 'http:' };
}

const labelKey = z.string().min(1).max(63).regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" and "-"');

export const tunnelConfig = z.strictObject({
  /** The tunnel's name in the agent's configuration (for its log lines). */
  name: z.string().min(1).max(255),
  labels: z.record(labelKey, z.string().max(255)).optional(),
  proto: z.enum(PROTOS).optional(),
  /** For ephemeral http/https/tls tunnels: the hostname asked for (checked against the acl). */
  hostname: z.string().min(1).max(253).optional(),
  forwards_to: z.string().min(1).max(1024),
  metadata: z.string().max(4096).default(''),
  /** Issue 36: `internal` for an endpoint reached only through forward-internal (its hostname under .internal). */
  bindings: z.array(z.enum(['public', 'internal'])).max(1).optional(),
  /** Endpoints at one URL that all enable pooling share its requests. */
  pooling_enabled: z.boolean().optional(),
  /** An internal TCP endpoint's port (tcp://NAME.internal:PORT); public TCP endpoints get theirs from the server. */
  port: z.number().int().min(1).max(65535).optional(),
}).refine((t) => (t.labels === undefined) !== (t.proto === undefined), { message: 'a tunnel has either labels or a proto (http, https, tcp, tls), not both' })
  .refine((t) => t.labels === undefined || Object.keys(t.labels).length > 0, { message: 'labels: at least one label' });
export type TunnelConfig = z.infer<typeof tunnelConfig>;

/** The agent's answer to `hello`. */
export const hello = z.strictObject({
  agent_version: z.string().min(1).max(64),
  os: z.string().min(1).max(64),
  metadata: z.string().max(4096).default(''),
  /** false with --no-update-check. */
  update_check: z.boolean(),
  tunnels: z.array(tunnelConfig).max(100),
});
export type Hello = z.infer<typeof hello>;

/** What the server asks in `hello`. */
export interface HelloRequest { heartbeat_ms: number; server_version: string }

export interface BoundTunnel {
  name: string;
  id?: string;
  public_url?: string;
  error?: { error_code: string; msg: string };
}
export interface Bound { session_id: string; tunnels: BoundTunnel[] }

export type Action = 'stop' | 'restart' | 'update';
export interface UpdateOffer { version: string; sha256: string; size: number }
export interface CommandRequest { action: Action; offer?: UpdateOffer }
/** A refusal of a command: the agent's reply body with a 409. */
export interface CommandRefusal { error_code: string; msg: string }

/** The server closes a session for good (credential deleted, bot deactivated): do not reconnect. */
export interface Closing { error_code: string; msg: string }

/** Agent error codes (a subset of the server's registry, named here so the bundle needs no server code). */
export const AGENT_CODES = {
  noUpdate: 'ERR_SERVICE_322',
  updateChecksOff: 'ERR_SERVICE_323',
  updating: 'ERR_SERVICE_324',
  updatedNotRestarted: 'ERR_SERVICE_325',
  restartUnsupported: 'ERR_SERVICE_329',
  /** The credential holds as many sessions as the server allows (403 on the upgrade, or `closing`). */
  sessionLimit: 'ERR_SERVICE_840',
} as const;

/** Semver-ish compare of x.y.z (pre-release tags ignored). */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/).slice(0, 3).map((n) => Number(n) || 0);
  const pb = b.split(/[.-]/).slice(0, 3).map((n) => Number(n) || 0);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
}

export const majorOf = (v: string) => Number(v.split('.')[0]) || 0;
