// Server settings: flags win over environment variables, which win over defaults.
import path from 'node:path';
import type { DrainOptions } from './http/drain.js';
import { DELIVERY_DEFAULTS, type DeliveryOptions } from './events/delivery.js';
import { DEFAULT_RELAY_POOL } from './gateway/relay-pool.js';
import { DEFAULT_RELAYS_PER_CLIENT } from './ingress/client-relays.js';
import type { IngressListenerSpec } from './ingress/types.js';
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
  /** Ingress listeners (`--ingress PUBLIC_PORT=ADDRESS:PORT`, EDGEFORM_INGRESS); none by default. */
  ingress?: IngressListenerSpec[];
  /** The data folder: the ingress's local certificate authority lives here (ingress-ca.pem). */
  dataDir?: string;
  /** Connections each ingress listener holds at most (EDGEFORM_INGRESS_MAX_CONNECTIONS); past it new ones are closed at once. */
  ingressMaxConnections?: number;
  /** Requests and streams one client address relays through agents at once (`--ingress-relays-per-client`); 0 turns the limit off. */
  ingressRelaysPerClient?: number;
  /** Listener bounds (handshake, header and idle timeouts, header size); tests shorten them. */
  ingressLimits?: Partial<import('./ingress/listen.js').ListenerLimits>;
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
  /** Repeatable `--ingress`; each value may also hold several, comma-separated. */
  ingress?: string[];
  ingressRelaysPerClient?: string | number;
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
export function parseIngress(values: string[]): IngressListenerSpec[] {
  const specs: IngressListenerSpec[] = [];
  for (const value of values.flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean)) {
    const m = /^(\d{1,5})=(\[[0-9a-fA-F:.]+\]|[^:\[\]=\s]+):(\d{1,5})$/.exec(value);
    const publicPort = Number(m?.[1]);
    const port = Number(m?.[3]);
    if (!m || publicPort < 1 || publicPort > 65535 || port > 65535) {
      throw new Error(`--ingress / EDGEFORM_INGRESS takes PUBLIC_PORT=ADDRESS:PORT, such as 443=127.0.0.1:8443 (public port 1 to 65535, port 0 to 65535), not ${JSON.stringify(value)}`);
    }
    if (specs.some((s) => s.publicPort === publicPort)) throw new Error(`--ingress / EDGEFORM_INGRESS names public port ${publicPort} twice; one listener serves each public port`);
    specs.push({ publicPort, host: m[2].replace(/^\[|\]$/g, ''), port });
  }
  return specs;
}

/** Agent sessions a credential may hold at once by default: a fleet's worth, and a bound on what a leaked token can open. */
export const DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL = 100;

export function resolveConfig(flags: ServeFlags, env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const dataDir = path.resolve(pick(flags.dataDir, env.EDGEFORM_DATA_DIR) ?? 'data');
  return {
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
    stackLockLeaseSeconds: int('EDGEFORM_STACK_LOCK_LEASE', pick(env.EDGEFORM_STACK_LOCK_LEASE), 60, 1, 3600),
    region: pick(flags.region, env.EDGEFORM_REGION) ?? 'local',
    agentHeartbeatMs: 1000 * int('--agent-heartbeat-interval / EDGEFORM_AGENT_HEARTBEAT_INTERVAL (seconds)', pick(flags.agentHeartbeatInterval, env.EDGEFORM_AGENT_HEARTBEAT_INTERVAL), 10, 1, 3600),
    agentMaxSessionsPerCredential: int('--agent-max-sessions-per-credential / EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL', pick(flags.agentMaxSessionsPerCredential, env.EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL), DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL, 0, 1_000_000),
    agentRelayPool: int('--agent-relay-pool / EDGEFORM_AGENT_RELAY_POOL', pick(flags.agentRelayPool, env.EDGEFORM_AGENT_RELAY_POOL), DEFAULT_RELAY_POOL, 0, 1000),
    endpointDomain: pick(flags.endpointDomain, env.EDGEFORM_ENDPOINT_DOMAIN) ?? 'edgeform.localhost',
    ingress: parseIngress(flags.ingress?.length ? flags.ingress : env.EDGEFORM_INGRESS ? [env.EDGEFORM_INGRESS] : []),
    ingressMaxConnections: int('EDGEFORM_INGRESS_MAX_CONNECTIONS', pick(env.EDGEFORM_INGRESS_MAX_CONNECTIONS), 10_000, 1, 1_000_000),
    ingressRelaysPerClient: int('--ingress-relays-per-client / EDGEFORM_INGRESS_RELAYS_PER_CLIENT', pick(flags.ingressRelaysPerClient, env.EDGEFORM_INGRESS_RELAYS_PER_CLIENT), DEFAULT_RELAYS_PER_CLIENT, 0, 1_000_000),
    acme: acmeSettings(pick(flags.acmeDirectory, env.EDGEFORM_ACME_DIRECTORY), pick(flags.acmeEmail, env.EDGEFORM_ACME_EMAIL), optionalPath(pick(flags.acmeCaFile, env.EDGEFORM_ACME_CA_FILE)), int('EDGEFORM_ACME_RETRY_SECONDS', pick(env.EDGEFORM_ACME_RETRY_SECONDS), 60, 1, 86_400)),
    dataDir,
  };
}
