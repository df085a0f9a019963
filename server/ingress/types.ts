// The ingress's internal contract: the routing table (plain data compiled from the store,
// swapped atomically on change), the exchange one HTTP request travels in, and the filter
// interface every route module implements. Listeners (listen.ts, tls.ts, tcp.ts), the
// table (table.ts), the HTTP handler and backends (http/, backends/) and the modules
// (modules/) meet only here.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { Gateway } from '../gateway/gateway.js';
import type { PolicyState } from '../policy/index.js';

/** One `--ingress PUBLIC_PORT=ADDRESS:PORT`: a listener at host:port standing for publicPort. */
export interface IngressListenerSpec {
  publicPort: number;
  host: string;
  port: number;
  /** A plain-HTTP listener (`--ingress-http`): agents' http endpoints, redirects to https for the rest. */
  plain?: boolean;
}

export type EdgeKind = 'https' | 'tcp' | 'tls';

/**
 * A stored document in its full input form: defaults applied, write-only values (webhook
 * secrets, OAuth client secrets, private keys) unsealed. Lives only in memory, never logged.
 */
export type FullDoc = Record<string, any> & { id: string };

/** An HTTPS edge with its routes (doc.routes, each a FullDoc), as the table holds it. */
export interface HttpsEdgeEntry {
  kind: 'https';
  doc: FullDoc;
  /** Filled by the HTTP side on first use (http/compile-edge.ts), cached per table version. */
  compiled?: unknown;
}
export interface StreamEdgeEntry {
  kind: 'tcp' | 'tls';
  doc: FullDoc;
  compiled?: unknown;
}
export type EdgeEntry = HttpsEdgeEntry | StreamEdgeEntry;

/** An uploaded TLS certificate usable for SNI selection. */
export interface CertificateEntry {
  id: string;
  /** SAN dNSNames (lower case, wildcards kept as `*.example.com`) and IPs. */
  dnsNames: string[];
  ips: string[];
  notBefore: Date;
  notAfter: Date;
  createdAt: Date;
  /** When the server issued it (ACME); null for an upload. */
  issuedAt?: Date | null;
  certificatePem: string;
  privateKeyPem: string;
}

export interface IngressTable {
  /** Monotonic: a request keeps the table it started with; compiled caches key on it. */
  version: number;
  /**
   * Public port -> what that port speaks and its edges by lower-case host name: `tcp` (one
   * edge), `tls` (TLS edges only) or `https` (HTTPS edges, and TLS edges too, each by name).
   */
  ports: Map<number, { kind: EdgeKind; hosts: Map<string, EdgeEntry> }>;
  certificates: CertificateEntry[];
  /** Backends by id (HTTPResponseBackend, WeightedBackend, TunnelGroupBackend), full docs with `kind`. */
  backends: Map<string, FullDoc & { kind: string }>;
  /** IP policy id -> its rules, compact (ip-rules.ts; a deleted policy is absent: zero rules, SPEC). */
  ipPolicies: Map<string, import('./ip-rules.js').IpRuleSet>;
  /** CertificateAuthority id -> PEM, for mutual TLS. */
  certificateAuthorities: Map<string, string>;
  /** Cloud endpoints by lower-case host, pool members oldest first (cloud-endpoints.ts); absent in tables made without them. */
  cloudEndpoints?: ReadonlyMap<string, CloudEndpointEntry[]>;
}

/** A cloud endpoint as the ingress serves it. */
export interface CloudEndpointEntry {
  id: string;
  url: import('../../provider/catalog/validate/endpoint-url.js').EndpointUrl;
  pooling: boolean;
  /** The policy's text, compiled once per entry by the ingress (cloud-endpoints.ts). */
  trafficPolicy: string;
}

export interface IngressDeps {
  gateway: Gateway;
  /** Rate-limit buckets of this ingress server (SPEC: counted per server). */
  policyState: PolicyState;
  /** One JSON log line (access log and warnings); never a secret or a body. */
  log: (fields: Record<string, unknown>) => void;
  /**
   * Writes a whole log line as made (the access log builds its JSON itself, http/access-log.ts);
   * without it the access log goes through `log` as fields.
   */
  writeLine?: (line: string) => void;
  now: () => number;
  /** Relays through agents per client address at once (client-relays.ts); none counted without it. */
  relays?: import('./client-relays.js').ClientRelays;
  /** How long the HTTP side waits for an upstream's response head before 504 (default 60 s). */
  upstreamTimeoutMs?: number;
  /**
   * How long a relayed answer's body, or an upgrade's answer, may go without a byte from the
   * upstream before it is cut (`--ingress-upstream-idle-timeout`; default 60 s; 0: never).
   */
  upstreamIdleMs?: number;
  /** Request bodies and partial WebSocket frames buffered at the edge, per connection and per server (buffer-budget.ts). */
  buffers?: import('./buffer-budget.js').BufferBudget;
  /** Relayed answers held for clients that do not read them, per connection and per server (buffer-budget.ts). */
  unread?: import('./buffer-budget.js').UnreadAnswers;
  /** The server's key box: sign-in sessions are sealed under a key derived from it (auth/session.ts). */
  box?: import('../store/secret-box.js').SecretBox;
  /** How long sign-in waits for each identity-provider call before ERR_SERVICE_803 (default 10 s). */
  signInTimeoutMs?: number;
  /** The server's public base URL: a SAML route's entity id and ACS are under it (auth/saml-metadata.ts). */
  publicUrl?: string;
  /** An ingress worker's circuit breakers (`--workers`): the primary's, by route and settings; absent: this process's own. */
  makeBreaker?: (key: string, cfg: import('./modules/circuit-state.js').BreakerConfig) => Pick<import('./modules/circuit-state.js').CircuitBreaker, 'allow' | 'retryAfter' | 'record'>;
}

/** An answer produced at the edge (module refusal, http_response backend, error page). */
export interface EdgeAnswer {
  status: number;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  /** The ingress error code (docs/ingress.md), logged and sent as `edgeform-error-code`. */
  code?: string;
  /** What the access log says besides the code (backend and tunnel ids, labels): never sent to the client. */
  detail?: string;
}

/** The response head the client will get; response filters edit it before it is sent. */
export interface ResponseHead {
  status: number;
  headers: Record<string, string | string[] | undefined>;
}

/** One HTTP request on its way through the route's filters to the backend. */
export interface Exchange {
  readonly req: IncomingMessage | Http2ServerRequest;
  readonly res: ServerResponse | Http2ServerResponse;
  readonly clientIp: string;
  readonly scheme: 'https' | 'http';
  /** Host without port, lower case. */
  readonly host: string;
  readonly publicPort: number;
  readonly table: IngressTable;
  readonly edge: FullDoc;
  readonly route: FullDoc;
  readonly deps: IngressDeps;
  /** What goes upstream; filters edit these (header names lower case). */
  method: string;
  path: string;
  upstreamHeaders: Record<string, string | string[]>;
  /** Reads (once) and buffers the request body up to `limit` bytes (413 past it); the backend then sends the buffer. */
  readBody(limit: number): Promise<Buffer>;
  /** Edits of the response head, run in registration order just before it is sent. */
  onResponseHead(edit: (head: ResponseHead) => void): void;
  /** A transform of the response body chosen from the final head (compression), or none. */
  onResponseBody(wrap: (head: ResponseHead) => import('node:stream').Transform | undefined): void;
  /** The response the chain holds so far (the upstream's head or an answer's), after next(); undefined before. */
  readonly responseHead?: ResponseHead;
  /** The status the client got (after the chain finished), or 'error' when the upstream failed. */
  readonly outcome: number | 'error' | undefined;
  /** Answers at the edge; later filters and the backend do not run. */
  answer(a: EdgeAnswer): void;
  readonly answered: boolean;
  /** Set for an HTTP/1.1 Upgrade (WebSocket): the client's socket; a filter that takes it over sets `taken`. */
  readonly upgrade?: { socket: Duplex; head: Buffer; taken: boolean };
  /** A raw byte stream to the route's backend (websocket_tcp_converter). */
  connectBackend(): Promise<Duplex>;
  /** Values filters leave for later ones (e.g. the traffic policy's action variables). */
  readonly locals: Record<string, unknown>;
}

/** Caddy's shape: a filter answers (ex.answer) or calls next(); code after `await next()` sees the outcome. */
export interface HttpFilter {
  handle(ex: Exchange, next: () => Promise<void>): Promise<void>;
}

/** Builds a route module's filter from its config (the route doc's member), once per table version. */
export type FilterFactory = (config: FullDoc[string], route: FullDoc, deps: IngressDeps) => HttpFilter;

/** Request headers that are hop-by-hop or set by the ingress itself, for every upstream request. */
export type Headers = IncomingHttpHeaders;
