// The version-2 agent listener (`--agent-listen ADDRESS:PORT`): TLS with a certificate from the
// server's local CA for `--agent-hostname` (clients trust `<data>/ingress-ca.pem`), then
// muxado (session.ts). Keeps what outlives one connection: sessions waiting for a resume
// (one heartbeat interval after their connection was lost), the agents a stop refuses, the
// keys of resume cookies and bind tokens, and the count of sessions being set up per credential.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { ApiError } from '../../http/errors.js';
import type { RateLimiter } from '../../http/rate-limit.js';
import type { ServerContext } from '../../resources/context.js';
import { openLocalCa } from '../../ingress/ca.js';
import type { Gateway } from '../gateway.js';
import { deleteSessions, sessionsOf, type SessionWriteOptions } from '../live-rows.js';
import { MUX_LIMITS, type MuxLimits } from './muxado.js';
import { mac, sameMac, V2Connection, type SessionState } from './session.js';
import { removeTunnels } from './rows.js';

export interface V2Options {
  host: string;
  port: number;
  /** Names in the listener's certificate (`--agent-hostname`, comma-separated). */
  hostnames: string[];
  dataDir: string;
  region: string;
  endpointDomain: string;
  /** Ports of TCP endpoints (--agent-tcp-ports); without it a TCP bind is refused. */
  tcpPorts?: { first: number; last: number };
  version: string;
  heartbeatMs: number;
  authTimeoutMs: number;
  commandTimeoutMs: number;
  maxSessionsPerCredential: number;
  authFailures?: RateLimiter;
  muxLimits: MuxLimits;
  /** TLS handshakes in progress and connections at most. */
  maxConnections: number;
}

/** Stopped agents remembered (their reconnects refused), at most; the oldest is forgotten past it. */
const MAX_STOPPED = 10_000;
/** How long a stopped agent's reconnects are refused. */
const STOPPED_MS = 24 * 3600_000;

export class V2Gateway {
  private server?: tls.Server;
  stopping = false;
  private readonly key = randomBytes(32);
  private detached = new Map<string, SessionState>();
  /** Every session held here, connected or waiting for a resume. */
  private sessions = new Map<string, SessionState>();
  private stopped = new Map<string, number>();
  private connecting = new Map<string, number>();
  private ending = new Set<Promise<void>>();
  address = '';
  /** The local CA's certificate file: what SDKs trust (caCert / session_ca_cert / root_cas). */
  caFile = '';
  readonly opts: V2Options;

  constructor(readonly ctx: ServerContext, readonly gateway: Gateway, opts: Partial<V2Options> & Pick<V2Options, 'host' | 'port' | 'dataDir' | 'region' | 'endpointDomain' | 'version' | 'heartbeatMs' | 'maxSessionsPerCredential'>, readonly log: (f: Record<string, unknown>) => void) {
    this.opts = { authTimeoutMs: 10_000, commandTimeoutMs: 5000, muxLimits: MUX_LIMITS, maxConnections: 10_000, ...opts, hostnames: opts.hostnames?.length ? opts.hostnames : ['localhost'] };
  }

  async start() {
    const ca = await openLocalCa(this.opts.dataDir, this.ctx);
    this.caFile = ca.certFile;
    const leaves = new Map(this.opts.hostnames.map((n) => [n.toLowerCase(), ca.leafFor(n)]));
    const first = ca.leafFor(this.opts.hostnames[0]);
    this.server = tls.createServer({
      cert: first.certificatePem, key: first.privateKeyPem, minVersion: 'TLSv1.2', handshakeTimeout: this.opts.authTimeoutMs,
      SNICallback: (name, cb) => {
        const leaf = leaves.get(name.toLowerCase()) ?? first;
        cb(null, tls.createSecureContext({ cert: leaf.certificatePem, key: leaf.privateKeyPem }));
      },
    }, (socket) => void new V2Connection(this, socket));
    this.server.maxConnections = this.opts.maxConnections;
    this.server.on('tlsClientError', () => {});
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(this.opts.port, this.opts.host, () => resolve());
    });
    const a = this.server.address() as AddressInfo;
    this.address = `${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  async stop() {
    this.stopping = true;
    this.server?.close();
    for (const st of [...this.sessions.values()]) {
      if (st.conn) st.conn.mux.goAway(0, 'the server is stopping');
      else this.endSession(st);
    }
    await Promise.all(this.ending);
  }

  /** Leases are renewed every fifth of the interval and stale after three of these (gateway.ts). */
  staleBefore() {
    return new Date(Date.now() - 3 * Math.max(20, Math.floor(this.opts.heartbeatMs / 5)));
  }

  sessionWriteOptions(): SessionWriteOptions {
    const tick = Math.max(20, Math.floor(this.opts.heartbeatMs / 5));
    return { repick: (t) => t.endpoint!.publicUrl, staleBefore: () => this.staleBefore(), staleAfterMs: 3 * tick, maxPerCredential: this.opts.maxSessionsPerCredential };
  }

  /** Runs the session's write counted against its credential's limit (with the sessions being set up here). */
  async admit<T>(credentialId: string, write: () => Promise<T>): Promise<T> {
    const limit = this.opts.maxSessionsPerCredential;
    if (limit > 0) {
      const held = (await sessionsOf(this.ctx, credentialId)) + (this.connecting.get(credentialId) ?? 0);
      if (held >= limit) throw this.sessionLimit(credentialId, held, limit);
    }
    this.connecting.set(credentialId, (this.connecting.get(credentialId) ?? 0) + 1);
    try {
      return await write();
    } finally {
      const left = (this.connecting.get(credentialId) ?? 1) - 1;
      if (left > 0) this.connecting.set(credentialId, left);
      else this.connecting.delete(credentialId);
    }
  }

  sessionLimit(credentialId: string, held: number, limit: number) {
    return new ApiError('ERR_SERVICE_840', `the credential ${credentialId} already holds ${held} agent session${held === 1 ? '' : 's'}, and the server allows at most ${limit} per credential (edgeform serve --agent-max-sessions-per-credential); ` +
      'stop one of its agents (POST /tunnel_sessions/{id}/stop), or connect with another credential', { limit });
  }

  cookieFor(st: SessionState) {
    return `${st.id}.${mac(this.key, `cookie|${st.id}|${st.credential.credentialId}`)}`;
  }

  /**
   * The session an Auth resumes: its ClientId, a cookie this server made for it, the same
   * credential. It may still have a connection the server has not seen fail yet (the agent's
   * reconnect is the news that it did): the caller closes that one.
   */
  resume(clientId: string, cookie: string, credentialId: string): SessionState | undefined {
    if (!clientId) return undefined;
    const st = this.sessions.get(clientId);
    if (!st || st.credential.credentialId !== credentialId) return undefined;
    if (!sameMac(cookie, `${st.id}.${mac(this.key, `cookie|${st.id}|${credentialId}`)}`)) return undefined;
    clearTimeout(st.expiry);
    st.expiry = undefined;
    this.detached.delete(clientId);
    return st;
  }

  /** A tunnel's bind token: its id and URL, for a rebind on a later session of the same credential. */
  bindToken(st: SessionState, t: { id: string; publicUrl?: string }) {
    const body = Buffer.from(JSON.stringify({ id: t.id, url: t.publicUrl })).toString('base64url');
    return `${body}.${mac(this.key, `bind|${body}|${st.credential.credentialId}`)}`;
  }

  readBindToken(token: string, credentialId: string, id: string): { url: string } | undefined {
    const [body, sig] = token.split('.');
    if (!body || !sig || !sameMac(sig, mac(this.key, `bind|${body}|${credentialId}`))) return undefined;
    try {
      const v = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
      return v.id === id && typeof v.url === 'string' ? { url: v.url } : undefined;
    } catch {
      return undefined;
    }
  }

  isDetached(st: SessionState) {
    return this.detached.get(st.id) === st;
  }

  /** The connection was lost: the session waits one heartbeat interval for the agent to resume it. */
  detach(st: SessionState) {
    st.conn = undefined;
    this.detached.set(st.id, st);
    st.expiry = setTimeout(() => {
      if (this.detached.get(st.id) !== st) return;
      this.log({ level: 'info', msg: 'agent session closed (version 2): not resumed in time', session: st.id });
      this.endSession(st);
    }, Math.max(1000, this.opts.heartbeatMs));
    st.expiry.unref();
  }

  /** A new session held here. */
  hold(st: SessionState) {
    this.sessions.set(st.id, st);
  }

  endSession(st: SessionState) {
    this.sessions.delete(st.id);
    clearTimeout(st.expiry);
    this.detached.delete(st.id);
    st.conn = undefined;
    this.gateway.detach(st.id);
    for (const id of st.tunnels.keys()) this.gateway.dropTunnel(id);
    const done = deleteSessions(this.ctx, [st.id])
      .catch((e) => this.log({ level: 'warn', msg: `could not delete session ${st.id} (the sweeper will): ${(e as Error).message}` }))
      .finally(() => this.ending.delete(done));
    this.ending.add(done);
  }

  markStopped(id: string) {
    this.stopped.set(id, Date.now() + STOPPED_MS);
    if (this.stopped.size > MAX_STOPPED) this.stopped.delete(this.stopped.keys().next().value!);
  }

  wasStopped(id: string) {
    const until = this.stopped.get(id);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.stopped.delete(id);
    return false;
  }
}

export { removeTunnels };
