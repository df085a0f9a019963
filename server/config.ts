// Server settings: flags win over environment variables, which win over defaults.
import os from 'node:os';
import path from 'node:path';
import type { DrainOptions } from './http/drain.js';
import { DELIVERY_DEFAULTS, type DeliveryOptions } from './events/delivery.js';
import { DEFAULT_RELAY_POOL } from './gateway/relay-pool.js';
import type { PeerChoice } from './gateway/gateway.js';
import { DEFAULT_EVENT_RETENTION, parseRetention } from './events/retention.js';
import { DEFAULT_BUFFER_MIB, DEFAULT_UNREAD_MIB } from './ingress/buffer-budget.js';
import { DEFAULT_RELAYS_PER_CLIENT } from './ingress/client-relays.js';
import { DEFAULT_UPSTREAM_IDLE_MS } from './ingress/http/exchange.js';
import { DEFAULT_BODY_IDLE_MS, DEFAULT_CONNECTIONS_PER_CLIENT } from './ingress/listen.js';
import type { IngressListenerSpec } from './ingress/types.js';
import { DEFAULT_START_TIMEOUT_MS, PG_DEFAULTS } from './store/pg-pool.js';
import { acmeSettings } from './ingress/acme/settings.js';

export interface ServerConfig {
  host: string;
  port: number;
  databaseUrl: string;
  /** Base of every uri; default http://<host>:<port> (the actual port when 0 was asked). */
  publicUrl?: string;
  /** Requests per minute per API key; 0 turns the limit off. */
  apiRateLimit: number;
  /** The rate limit's window in ms (default a minute; tests shorten it, as with `delivery`). */
  apiRateWindowMs?: number;
  /** Failed authentications per minute per client address before 429; 0 turns the limit off. */
  authFailureLimit: number;
  /** Secret fingerprints (POST /_edgeform/fingerprints) per API key per hour; 0 turns the limit off. */
  fingerprintRateLimit: number;
  bootstrapToken?: string;
  bootstrapTokenFile: string;
  /** 32-byte key (hex or base64) that encrypts secrets at rest; else the key file. */
  secretKey?: string;
  secretKeyFile: string;
  /** The key being rotated away from (EDGEFORM_SECRET_KEY_PREVIOUS, or a file of it): re-sealed under the new key at start. */
  secretKeyPrevious?: string;
  secretKeyPreviousFile?: string;
  /** Request log lines; default stdout. */
  log?: (line: string) => void;
  /** How shutdown closes kept-alive connections (tests shorten it). */
  drain?: Partial<DrainOptions>;
  /** How long a stack lock lives without renewal (EDGEFORM_STACK_LOCK_LEASE, seconds; default 60). */
  stackLockLeaseSeconds?: number;
  /** Event delivery timing (tests shorten the backoff). */
  delivery?: Partial<DeliveryOptions>;
  /** Delivered events older than this are pruned (`--event-retention`, EDGEFORM_EVENT_RETENTION, default 72h); 0 keeps them. */
  eventRetentionMs?: number;
  /** The `region` of agent sessions started on this server (default `local`). */
  region: string;
  /** Agent heartbeat interval in ms (default 10 s): a vanished agent's session is gone within it. */
  agentHeartbeatMs: number;
  /** Agent sessions one credential may hold at once across all instances (default 100); 0 turns the limit off. */
  agentMaxSessionsPerCredential?: number;
  /** Pooled upstream connections per tunnel of an agent session for relayed HTTP requests (default 16); 0: each request is its own HTTP/2 stream. */
  agentRelayPool?: number;
  /** Domain of ephemeral endpoints' hostnames (default `edgeform.localhost`). */
  endpointDomain: string;
  /** How long an agent command waits for the agent's acknowledgement before 504 (default 5 s). */
  agentCommandTimeoutMs?: number;
  /** How long a connected agent has to say hello before it is closed (default 10 s). */
  agentHelloTimeoutMs?: number;
  /** The version-2 agent listener (`--agent-listen ADDRESS:PORT`, EDGEFORM_AGENT_LISTEN): the service's SDKs connect here; none by default. */
  agentListen?: { host: string; port: number };
  /** Public ports of agents' TCP endpoints (`--agent-tcp-ports FIRST-LAST`, EDGEFORM_AGENT_TCP_PORTS); none by default. */
  agentTcpPorts?: { first: number; last: number };
  /** The `ssh -R` listener (`--ssh-listen ADDRESS:PORT`, EDGEFORM_SSH_LISTEN): OpenSSH as an agent; none by default. */
  sshListen?: { host: string; port: number };
  /** The listener for the other instances (`--peer-listen ADDRESS:PORT`, EDGEFORM_PEER_LISTEN): mutual TLS under a key derived from the secret key; none by default. */
  peerListen?: { host: string; port: number };
  /** The URL the other instances reach the peer listener at (`--peer-url`, EDGEFORM_PEER_URL; default https://<peer-listen address>:<port>). */
  peerUrl?: string;
  /** Connect and ping bound of each link to another instance, ms (`--peer-timeout`, seconds, EDGEFORM_PEER_TIMEOUT; default 5 s). */
  peerTimeoutMs?: number;
  /** How a tunnel-group backend chooses among instances (`--peer-choice`, EDGEFORM_PEER_CHOICE; default round-robin). */
  peerChoice?: PeerChoice;
  /** How long SIGTERM waits, /healthz answering 503, before it stops accepting (`--drain-grace`, seconds, EDGEFORM_DRAIN_GRACE; default 10 s with --peer-listen, else 0). */
  drainGraceMs?: number;
  /** Names in the agent listener's certificate (`--agent-hostname`, comma-separated; default `localhost`). */
  agentHostnames?: string[];
  /** Ingress listeners (`--ingress PUBLIC_PORT=ADDRESS:PORT`, EDGEFORM_INGRESS); none by default. */
  ingress?: IngressListenerSpec[];
  /** Plain-HTTP ingress listeners for agents' http endpoints (`--ingress-http PUBLIC_PORT=ADDRESS:PORT`, EDGEFORM_INGRESS_HTTP); none by default. */
  ingressHttp?: IngressListenerSpec[];
  /** The data folder: the ingress's local certificate authority lives here (ingress-ca.pem). */
  dataDir?: string;
  /** Connections each ingress listener holds at most (EDGEFORM_INGRESS_MAX_CONNECTIONS); past it new ones are closed at once. */
  ingressMaxConnections?: number;
  /** Requests and streams one client address relays through agents at once (`--ingress-relays-per-client`); 0 turns the limit off. */
  ingressRelaysPerClient?: number;
  /** Open connections of one client address per ingress listener (`--ingress-connections-per-client`); 0 turns the limit off. */
  ingressConnectionsPerClient?: number;
  /** A request body idle this long is cut, in ms (`--ingress-body-idle-timeout`, seconds); 0: never. */
  ingressBodyIdleTimeoutMs?: number;
  /** How long an upstream may send nothing (head, body, upgrade answer) before it is cut, in ms (`--ingress-upstream-idle-timeout`, seconds); 0: never for bodies and upgrades. */
  ingressUpstreamIdleTimeoutMs?: number;
  /** Request bodies and partial WebSocket frames the ingress buffers at once, in MiB (`--ingress-buffer-mib`); 0 turns the server-wide bound off. */
  ingressBufferMib?: number;
  /** Relayed answers the ingress holds for clients that do not read, in MiB (`--ingress-unread-mib`); 0 turns the server-wide bound off. */
  ingressUnreadMib?: number;
  /**
   * Processes serving the ingress listeners (`--workers`, EDGEFORM_WORKERS; default 1, the
   * ingress in this process; `auto`: the cores available, os.availableParallelism()). Only
   * `edgeform serve` starts workers (bin/serve.ts, server/cluster/); startServer in-process
   * serves the ingress itself whatever this says.
   */
  workers?: number;
  /** Set by `edgeform serve` (bin/serve.ts) only: start `workers` ingress worker processes (node:cluster) when above 1. */
  forkWorkers?: boolean;
  /** The pace of cancels toward agents and its backlog bounds (gateway/reset-pacer.ts); tests make them small. */
  agentResetPace?: Partial<import('./gateway/reset-pacer.js').ResetPace>;
  /** Listener bounds (handshake, header and idle timeouts, header size); tests shorten them. */
  ingressLimits?: Partial<import('./ingress/listen.js').ListenerLimits>;
  /** PostgreSQL: the pool's size and its bounds in ms (--database-pool-size, --database-acquire-timeout, --database-lock-timeout, --database-statement-timeout). */
  databasePool?: Partial<import('./store/pg-pool.js').PgBounds>;
  /** PostgreSQL: how long a start waits for the database to answer, ms (--database-start-timeout). */
  databaseStartTimeoutMs?: number;
  /** ACME (`--acme-directory`, `--acme-email`, `--acme-ca-file`, EDGEFORM_ACME_RETRY_SECONDS): certificates for the edges' names from a directory; none by default. */
  acme?: import('./ingress/acme/settings.js').AcmeSettings;
}

export interface ServeFlags {
  host?: string;
  port?: string | number;
  database?: string;
  publicUrl?: string;
  apiRateLimit?: string | number;
  authFailureLimit?: string | number;
  dataDir?: string;
  region?: string;
  agentHeartbeatInterval?: string | number;
  agentMaxSessionsPerCredential?: string | number;
  agentRelayPool?: string | number;
  endpointDomain?: string;
  agentListen?: string;
  sshListen?: string;
  peerListen?: string;
  peerUrl?: string;
  peerTimeout?: string | number;
  peerChoice?: string;
  drainGrace?: string | number;
  agentHostname?: string;
  agentTcpPorts?: string;
  /** Repeatable `--ingress`; each value may also hold several, comma-separated. */
  ingress?: string[];
  /** Repeatable `--ingress-http` (plain-HTTP listeners), as `--ingress`. */
  ingressHttp?: string[];
  ingressRelaysPerClient?: string | number;
  eventRetention?: string;
  databasePoolSize?: string | number;
  databaseAcquireTimeout?: string | number;
  databaseLockTimeout?: string | number;
  databaseStatementTimeout?: string | number;
  databaseStartTimeout?: string | number;
  ingressConnectionsPerClient?: string | number;
  ingressBodyIdleTimeout?: string | number;
  ingressUpstreamIdleTimeout?: string | number;
  ingressBufferMib?: string | number;
  ingressUnreadMib?: string | number;
  workers?: string | number;
  acmeDirectory?: string;
  acmeEmail?: string;
  acmeCaFile?: string;
}

function int(name: string, value: string | number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(value)}`);
  return n;
}

/** Every uri the API returns starts with it, so a value that is not an http(s) URL is refused at start. */
function publicUrl(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash) {
    throw new Error(`--public-url / EDGEFORM_PUBLIC_URL must be an http(s) URL such as https://api.example.com, not ${JSON.stringify(value)}`);
  }
  return value.replace(/\/+$/, '');
}

const optionalPath = (p: string | undefined) => (p === undefined ? undefined : path.resolve(p));

/**
 * A supplied first token must be as hard to guess as a generated one is meant to be: at
 * least 32 characters a bearer token may hold, not a repetition of a few (a generated
 * token is 43 base62 characters). The message never repeats the value.
 */
function bootstrapToken(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const strong = value.length >= 32 && /^[A-Za-z0-9._~+/=-]+$/.test(value) && new Set(value).size >= 10;
  if (!strong) {
    throw new Error(
      'EDGEFORM_BOOTSTRAP_TOKEN is too weak: it must be at least 32 characters of letters, digits and - . _ ~ + / =, with at least 10 different ones (for example the output of openssl rand -hex 32); leave it unset to have one generated',
    );
  }
  return value;
}

/** The first value that is set; an empty string (`EDGEFORM_PORT=` in a shell or compose file) counts as unset. */
const pick = <T extends string | number>(...values: (T | undefined)[]): T | undefined => values.find((v) => v !== undefined && v !== '');

/**
 * `PUBLIC_PORT=ADDRESS:PORT` values: a listener at ADDRESS:PORT serving the edges' hostports
 * on PUBLIC_PORT. ADDRESS may be a name, an IPv4 address or a bracketed IPv6 one; PORT 0
 * picks a free port (the server reports which).
 */
export function parseIngress(values: string[], setting = '--ingress / EDGEFORM_INGRESS', example = '443=127.0.0.1:8443'): IngressListenerSpec[] {
  const specs: IngressListenerSpec[] = [];
  for (const value of values.flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean)) {
    const m = /^(\d{1,5})=(\[[0-9a-fA-F:.]+\]|[^:\[\]=\s]+):(\d{1,5})$/.exec(value);
    const publicPort = Number(m?.[1]);
    const port = Number(m?.[3]);
    if (!m || publicPort < 1 || publicPort > 65535 || port > 65535) {
      throw new Error(`${setting} takes PUBLIC_PORT=ADDRESS:PORT, such as ${example} (public port 1 to 65535, port 0 to 65535), not ${JSON.stringify(value)}`);
    }
    if (specs.some((s) => s.publicPort === publicPort)) throw new Error(`${setting} names public port ${publicPort} twice; one listener serves each public port`);
    specs.push({ publicPort, host: m[2].replace(/^\[|\]$/g, ''), port });
  }
  return specs;
}

/** `ADDRESS:PORT` of a listener (PORT 0 picks a free one), or undefined when unset. */
function parseListen(value: string | undefined, setting: string, example: string): { host: string; port: number } | undefined {
  if (value === undefined || value === '') return undefined;
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:\[\]=\s]+):(\d{1,5})$/.exec(value.trim());
  if (!m || Number(m[2]) > 65535) throw new Error(`${setting} takes ADDRESS:PORT, such as ${example} (port 0 picks a free one), not ${JSON.stringify(value)}`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

/** Ports an agent TCP endpoint range holds at most: each is a listener. */
export const MAX_AGENT_TCP_PORTS = 1000;

/** `FIRST-LAST` of agents' TCP endpoint ports, or undefined. */
export function parseTcpPorts(value: string | undefined): { first: number; last: number } | undefined {
  if (value === undefined || value === '') return undefined;
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(value.trim());
  const first = Number(m?.[1]);
  const last = Number(m?.[2]);
  if (!m || first < 1 || last > 65535 || last < first || last - first + 1 > MAX_AGENT_TCP_PORTS) {
    throw new Error(`--agent-tcp-ports / EDGEFORM_AGENT_TCP_PORTS takes FIRST-LAST, such as 20000-20099 (1 to 65535, at most ${MAX_AGENT_TCP_PORTS} ports), not ${JSON.stringify(value)}`);
  }
  return { first, last };
}
/** `ADDRESS:PORT` of the version-2 agent listener, or undefined. */
export const parseAgentListen = (value: string | undefined) => parseListen(value, '--agent-listen / EDGEFORM_AGENT_LISTEN', '127.0.0.1:4443');
/** `ADDRESS:PORT` of the `ssh -R` listener, or undefined. */
export const parseSshListen = (value: string | undefined) => parseListen(value, '--ssh-listen / EDGEFORM_SSH_LISTEN', '127.0.0.1:2222');

/** `ADDRESS:PORT` of the listener for the other instances, or undefined. */
export const parsePeerListen = (value: string | undefined) => parseListen(value, '--peer-listen / EDGEFORM_PEER_LISTEN', '10.0.0.5:7443');

/** The peer URL: https://HOST:PORT, nothing else. */
function peerUrl(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || url.protocol !== 'https:' || !url.port || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash || url.username) {
    throw new Error(`--peer-url / EDGEFORM_PEER_URL must be https://HOST:PORT, the address other instances reach --peer-listen at, such as https://10.0.0.5:7443, not ${JSON.stringify(value)}`);
  }
  return `https://${url.host}`;
}

/** Agent sessions a credential may hold at once by default: a fleet's worth, and a bound on what a leaked token can open. */
export const DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL = 100;

export function resolveConfig(flags: ServeFlags, env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const dataDir = path.resolve(pick(flags.dataDir, env.EDGEFORM_DATA_DIR) ?? 'data');
  const resolved: ServerConfig = {
    host: pick(flags.host, env.EDGEFORM_HOST) ?? '127.0.0.1',
    port: int('--port / EDGEFORM_PORT', pick(flags.port, env.EDGEFORM_PORT), 8080, 0, 65535),
    databaseUrl: pick(flags.database, env.EDGEFORM_DATABASE_URL) ?? `file:${path.join(dataDir, 'edgeform.db')}`,
    publicUrl: publicUrl(pick(flags.publicUrl, env.EDGEFORM_PUBLIC_URL)),
    apiRateLimit: int('--api-rate-limit / EDGEFORM_API_RATE_LIMIT', pick(flags.apiRateLimit, env.EDGEFORM_API_RATE_LIMIT), 600, 0, 1_000_000_000),
    authFailureLimit: int('--auth-failure-limit / EDGEFORM_AUTH_FAILURE_LIMIT', pick(flags.authFailureLimit, env.EDGEFORM_AUTH_FAILURE_LIMIT), 30, 0, 1_000_000),
    bootstrapToken: bootstrapToken(pick(env.EDGEFORM_BOOTSTRAP_TOKEN)),
    fingerprintRateLimit: int('EDGEFORM_FINGERPRINT_RATE_LIMIT', pick(env.EDGEFORM_FINGERPRINT_RATE_LIMIT), 1000, 0, 1_000_000_000),
    bootstrapTokenFile: path.resolve(pick(env.EDGEFORM_BOOTSTRAP_TOKEN_FILE) ?? path.join(dataDir, 'bootstrap-token')),
    secretKey: pick(env.EDGEFORM_SECRET_KEY),
    secretKeyFile: path.resolve(pick(env.EDGEFORM_SECRET_KEY_FILE) ?? path.join(dataDir, 'secret.key')),
    secretKeyPrevious: pick(env.EDGEFORM_SECRET_KEY_PREVIOUS),
    secretKeyPreviousFile: optionalPath(pick(env.EDGEFORM_SECRET_KEY_PREVIOUS_FILE)),
    delivery: { timeoutMs: int('EDGEFORM_EVENT_DELIVERY_TIMEOUT_MS', pick(env.EDGEFORM_EVENT_DELIVERY_TIMEOUT_MS), DELIVERY_DEFAULTS.timeoutMs, 100, 600_000) },
    eventRetentionMs: parseRetention('--event-retention / EDGEFORM_EVENT_RETENTION', pick(flags.eventRetention, env.EDGEFORM_EVENT_RETENTION) ?? DEFAULT_EVENT_RETENTION),
    stackLockLeaseSeconds: int('EDGEFORM_STACK_LOCK_LEASE', pick(env.EDGEFORM_STACK_LOCK_LEASE), 60, 1, 3600),
    region: pick(flags.region, env.EDGEFORM_REGION) ?? 'local',
    agentHeartbeatMs: 1000 * int('--agent-heartbeat-interval / EDGEFORM_AGENT_HEARTBEAT_INTERVAL (seconds)', pick(flags.agentHeartbeatInterval, env.EDGEFORM_AGENT_HEARTBEAT_INTERVAL), 10, 1, 3600),
    agentMaxSessionsPerCredential: int('--agent-max-sessions-per-credential / EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL', pick(flags.agentMaxSessionsPerCredential, env.EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL), DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL, 0, 1_000_000),
    agentRelayPool: int('--agent-relay-pool / EDGEFORM_AGENT_RELAY_POOL', pick(flags.agentRelayPool, env.EDGEFORM_AGENT_RELAY_POOL), DEFAULT_RELAY_POOL, 0, 1000),
    endpointDomain: pick(flags.endpointDomain, env.EDGEFORM_ENDPOINT_DOMAIN) ?? 'edgeform.localhost',
    agentListen: parseAgentListen(pick(flags.agentListen, env.EDGEFORM_AGENT_LISTEN)),
    agentTcpPorts: parseTcpPorts(pick(flags.agentTcpPorts, env.EDGEFORM_AGENT_TCP_PORTS)),
    sshListen: parseSshListen(pick(flags.sshListen, env.EDGEFORM_SSH_LISTEN)),
    peerListen: parsePeerListen(pick(flags.peerListen, env.EDGEFORM_PEER_LISTEN)),
    peerUrl: peerUrl(pick(flags.peerUrl, env.EDGEFORM_PEER_URL)),
    peerTimeoutMs: 1000 * int('--peer-timeout / EDGEFORM_PEER_TIMEOUT (seconds)', pick(flags.peerTimeout, env.EDGEFORM_PEER_TIMEOUT), 5, 1, 300),
    peerChoice: ((v) => {
      if (v === undefined || v === 'round-robin' || v === 'prefer-local') return v;
      throw new Error(`--peer-choice / EDGEFORM_PEER_CHOICE must be round-robin or prefer-local, not ${JSON.stringify(v)}`);
    })(pick(flags.peerChoice, env.EDGEFORM_PEER_CHOICE)),
    agentHostnames: (pick(flags.agentHostname, env.EDGEFORM_AGENT_HOSTNAME) ?? 'localhost').split(',').map((n) => n.trim()).filter(Boolean),
    ingress: parseIngress(flags.ingress?.length ? flags.ingress : env.EDGEFORM_INGRESS ? [env.EDGEFORM_INGRESS] : []),
    ingressHttp: parseIngress(flags.ingressHttp?.length ? flags.ingressHttp : env.EDGEFORM_INGRESS_HTTP ? [env.EDGEFORM_INGRESS_HTTP] : [], '--ingress-http / EDGEFORM_INGRESS_HTTP', '80=127.0.0.1:8080').map((l) => ({ ...l, plain: true })),
    ingressMaxConnections: int('EDGEFORM_INGRESS_MAX_CONNECTIONS', pick(env.EDGEFORM_INGRESS_MAX_CONNECTIONS), 10_000, 1, 1_000_000),
    ingressRelaysPerClient: int('--ingress-relays-per-client / EDGEFORM_INGRESS_RELAYS_PER_CLIENT', pick(flags.ingressRelaysPerClient, env.EDGEFORM_INGRESS_RELAYS_PER_CLIENT), DEFAULT_RELAYS_PER_CLIENT, 0, 1_000_000),
    databasePool: {
      poolSize: int('--database-pool-size / EDGEFORM_DATABASE_POOL_SIZE', pick(flags.databasePoolSize, env.EDGEFORM_DATABASE_POOL_SIZE), PG_DEFAULTS.poolSize, 1, 10_000),
      acquireTimeoutMs: 1000 * int('--database-acquire-timeout / EDGEFORM_DATABASE_ACQUIRE_TIMEOUT (seconds)', pick(flags.databaseAcquireTimeout, env.EDGEFORM_DATABASE_ACQUIRE_TIMEOUT), PG_DEFAULTS.acquireTimeoutMs / 1000, 1, 3600),
      lockTimeoutMs: 1000 * int('--database-lock-timeout / EDGEFORM_DATABASE_LOCK_TIMEOUT (seconds; 0 turns it off)', pick(flags.databaseLockTimeout, env.EDGEFORM_DATABASE_LOCK_TIMEOUT), PG_DEFAULTS.lockTimeoutMs / 1000, 0, 3600),
      statementTimeoutMs: 1000 * int('--database-statement-timeout / EDGEFORM_DATABASE_STATEMENT_TIMEOUT (seconds; 0 turns it off)', pick(flags.databaseStatementTimeout, env.EDGEFORM_DATABASE_STATEMENT_TIMEOUT), PG_DEFAULTS.statementTimeoutMs / 1000, 0, 86_400),
    },
    databaseStartTimeoutMs: 1000 * int('--database-start-timeout / EDGEFORM_DATABASE_START_TIMEOUT (seconds)', pick(flags.databaseStartTimeout, env.EDGEFORM_DATABASE_START_TIMEOUT), DEFAULT_START_TIMEOUT_MS / 1000, 0, 86_400),
    ingressConnectionsPerClient: int('--ingress-connections-per-client / EDGEFORM_INGRESS_CONNECTIONS_PER_CLIENT', pick(flags.ingressConnectionsPerClient, env.EDGEFORM_INGRESS_CONNECTIONS_PER_CLIENT), DEFAULT_CONNECTIONS_PER_CLIENT, 0, 1_000_000),
    ingressBodyIdleTimeoutMs: 1000 * int('--ingress-body-idle-timeout / EDGEFORM_INGRESS_BODY_IDLE_TIMEOUT (seconds)', pick(flags.ingressBodyIdleTimeout, env.EDGEFORM_INGRESS_BODY_IDLE_TIMEOUT), DEFAULT_BODY_IDLE_MS / 1000, 0, 3600),
    ingressUpstreamIdleTimeoutMs: 1000 * int('--ingress-upstream-idle-timeout / EDGEFORM_INGRESS_UPSTREAM_IDLE_TIMEOUT (seconds)', pick(flags.ingressUpstreamIdleTimeout, env.EDGEFORM_INGRESS_UPSTREAM_IDLE_TIMEOUT), DEFAULT_UPSTREAM_IDLE_MS / 1000, 0, 86_400),
    ingressBufferMib: int('--ingress-buffer-mib / EDGEFORM_INGRESS_BUFFER_MIB', pick(flags.ingressBufferMib, env.EDGEFORM_INGRESS_BUFFER_MIB), DEFAULT_BUFFER_MIB, 0, 1_000_000),
    ingressUnreadMib: int('--ingress-unread-mib / EDGEFORM_INGRESS_UNREAD_MIB', pick(flags.ingressUnreadMib, env.EDGEFORM_INGRESS_UNREAD_MIB), DEFAULT_UNREAD_MIB, 0, 1_000_000),
    acme: acmeSettings(pick(flags.acmeDirectory, env.EDGEFORM_ACME_DIRECTORY), pick(flags.acmeEmail, env.EDGEFORM_ACME_EMAIL), optionalPath(pick(flags.acmeCaFile, env.EDGEFORM_ACME_CA_FILE)), int('EDGEFORM_ACME_RETRY_SECONDS', pick(env.EDGEFORM_ACME_RETRY_SECONDS), 60, 1, 86_400)),
    dataDir,
    // 1 by default until workers relay to agents over the pooled connections and /metrics adds
    // their counters (docs/operations.md, "Workers"); `auto` is one per core, as nginx's.
    workers: ((w) => (w === 'auto' ? os.availableParallelism() : int('--workers / EDGEFORM_WORKERS (a number, or auto)', w, 1, 1, 1024)))(pick(flags.workers, env.EDGEFORM_WORKERS)),
  };
  for (const l of resolved.ingressHttp ?? []) {
    if (resolved.ingress?.some((t) => t.publicPort === l.publicPort)) throw new Error(`public port ${l.publicPort} is named by --ingress (TLS) and --ingress-http (plain HTTP); one listener serves each public port`);
  }
  resolved.drainGraceMs = 1000 * int('--drain-grace / EDGEFORM_DRAIN_GRACE (seconds)', pick(flags.drainGrace, env.EDGEFORM_DRAIN_GRACE), resolved.peerListen ? 10 : 0, 0, 3600);
  if (resolved.peerListen && !resolved.peerUrl && /^(0\.0\.0\.0|::)$/.test(resolved.peerListen.host)) {
    throw new Error('--peer-listen on a wildcard address needs --peer-url / EDGEFORM_PEER_URL: the https://HOST:PORT other instances reach this one at');
  }
  if (resolved.agentTcpPorts && !resolved.ingress?.length) throw new Error('--agent-tcp-ports / EDGEFORM_AGENT_TCP_PORTS needs an --ingress listener: its ports are listened on at the first one\'s address');
  return resolved;
}
