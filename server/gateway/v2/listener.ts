// The version-2 agent listener (`--agent-listen ADDRESS:PORT`): TLS with a certificate from the
// server's local CA for `--agent-hostname` (clients trust `<data>/ingress-ca.pem`), then
// muxado (session.ts). Keeps what outlives one connection: sessions waiting for a resume
// (one heartbeat interval after their connection was lost), the count of sessions being set up
// per credential, and the key of resume cookies and bind tokens: a sealed setting, the same on
// every instance of one database and after a restart, so an agent resumes its session (same id)
// wherever it reconnects. The sessions the server ended on purpose (stop, restart) are recorded
// in the database (AgentSessionEnd), so that their cookies no longer bring them back.
import { randomBytes } from 'node:crypto';
import { sealedSetting } from '../../store/sealed-settings.js';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { ApiError } from '../../http/errors.js';
import type { RateLimiter } from '../../http/rate-limit.js';
import type { ServerContext } from '../../resources/context.js';
import { openLocalCa } from '../../ingress/ca.js';
import type { Gateway } from '../gateway.js';
import { sessionsOf, type SessionWriteOptions } from '../live-rows.js';
import { MUX_LIMITS, type MuxLimits } from './muxado.js';
import { mac, sameMac, V2Connection, type SessionState } from './session.js';
import { deleteHeldSessions, endedReason, markEnded, pruneEnded, removeTunnels, takenElsewhere, type EndReason } from './rows.js';

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

/** How long a stopped agent's reconnects are refused (and a restarted session's cookie no longer resumes it). */
const ENDED_MS = 24 * 3600_000;
/** The sealed setting holding the key of resume cookies and bind tokens. */
export const RESUME_KEY_SETTING = 'agent_resume_key';

export class V2Gateway {
  private server?: tls.Server;
  stopping = false;
  private key = Buffer.alloc(0);
  private holderTimer?: NodeJS.Timeout;
  private detached = new Map<string, SessionState>();
  /** Every session held here, connected or waiting for a resume. */
  private sessions = new Map<string, SessionState>();
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
    const { value } = await sealedSetting(this.ctx.db, this.ctx.box, RESUME_KEY_SETTING, () => randomBytes(32).toString('base64'));
    this.key = Buffer.from(value, 'base64');
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
    // Sessions whose agent resumed them on another instance are let go of here (their rows are
    // that instance's now); expired records of ended sessions are pruned.
    let ticks = 0;
    let running = false;
    this.holderTimer = setInterval(() => {
      if (running) return;
      const prune = ++ticks % 100 === 0;
      if (!this.sessions.size && !prune) return;
      running = true;
      void (async () => {
        for (const id of await takenElsewhere(this.ctx, this.gateway.instanceId, [...this.sessions.keys()])) {
          const st = this.sessions.get(id);
          if (st) this.release(st);
        }
        if (prune) await pruneEnded(this.ctx);
      })().catch((e) => this.log({ level: 'warn', msg: `agent listener: ${(e as Error).message}` })).finally(() => { running = false; });
    }, Math.max(20, Math.floor(this.opts.heartbeatMs / 5)));
    this.holderTimer.unref();
  }

  async stop() {
    this.stopping = true;
    clearInterval(this.holderTimer);
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

  /** The resume cookie: the session's id and start, for its credential, under the shared key. */
  cookieFor(st: SessionState) {
    const body = `${st.id}.${st.startedAt.getTime()}`;
    return `${body}.${mac(this.key, `cookie|${body}|${st.credential.credentialId}`)}`;
  }

  /** The session a cookie vouches for (made by any instance of this database), if it is this credential's and names `clientId`. */
  readCookie(cookie: string, clientId: string, credentialId: string): { id: string; startedAt: Date } | undefined {
    const m = /^([a-z]+_[A-Za-z0-9]+)\.(\d{1,15})\.([A-Za-z0-9_-]+)$/.exec(cookie);
    if (!m || m[1] !== clientId || !sameMac(m[3], mac(this.key, `cookie|${m[1]}.${m[2]}|${credentialId}`))) return undefined;
    return { id: m[1], startedAt: new Date(Number(m[2])) };
  }

  /**
   * The session an Auth resumes, when this instance holds it: its ClientId, a cookie for it,
   * the same credential. It may still have a connection the server has not seen fail yet (the
   * agent's reconnect is the news that it did): the caller closes that one.
   */
  resume(clientId: string, cookie: string, credentialId: string): SessionState | undefined {
    if (!clientId) return undefined;
    const st = this.sessions.get(clientId);
    if (!st || st.credential.credentialId !== credentialId || !this.readCookie(cookie, clientId, credentialId)) return undefined;
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

  /** Forgets a session here without touching its rows: its agent resumed it on another instance. */
  release(st: SessionState) {
    if (this.sessions.get(st.id) !== st) return;
    this.log({ level: 'info', msg: 'agent session resumed on another instance; let go of here (version 2)', session: st.id });
    const conn = st.conn;
    this.forget(st);
    conn?.release();
  }

  private forget(st: SessionState) {
    this.sessions.delete(st.id);
    clearTimeout(st.expiry);
    this.detached.delete(st.id);
    st.conn = undefined;
    this.gateway.detach(st.id);
    for (const id of st.tunnels.keys()) this.gateway.dropTunnel(id);
  }

  endSession(st: SessionState) {
    if (this.sessions.get(st.id) !== st) return;
    this.forget(st);
    const done = deleteHeldSessions(this.ctx, this.gateway.instanceId, [st.id])
      .catch((e) => this.log({ level: 'warn', msg: `could not delete session ${st.id} (the sweeper will): ${(e as Error).message}` }))
      .finally(() => this.ending.delete(done));
    this.ending.add(done);
  }

  /** Records that the server ended the session on purpose, on every instance: its cookie no longer resumes it. */
  markEnded(id: string, reason: EndReason): Promise<void> {
    return markEnded(this.ctx, id, reason, new Date(Date.now() + ENDED_MS));
  }

  endedReason(id: string): Promise<EndReason | undefined> {
    return endedReason(this.ctx, id);
  }
}

export { removeTunnels };
