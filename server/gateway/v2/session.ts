// One version-2 agent connection after its TLS handshake: the muxado session, its Auth (the
// credential's token; a resumed session keeps its id), Bind, labeled bind, Unbind and the
// server's commands, heartbeats both ways, and proxied connections for the ingress. The
// session's rows and its place in the gateway (leases, revalidation, commands across
// instances) are the gateway's (gateway.ts attach).
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { ClientHttp2Stream } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { Action } from '../../../agent/protocol.js';
import { tunnelSession } from '../../../provider/catalog/tunnels.js';
import { ApiError, notFound } from '../../http/errors.js';
import { clientKey } from '../../http/rate-limit.js';
import { newId } from '../../store/ids.js';
import { bindAllowed, refusal } from '../acl.js';
import { authenticateAgent, type AgentCredential } from '../auth.js';
import { createSession, deleteSessions, SessionLimit, type TunnelRow } from '../live-rows.js';
import type { AttachedSession } from '../gateway.js';
import { RelayPool, type PooledConnection } from '../relay-pool.js';
import { PolicyState } from '../../policy/index.js';
import { buildChain } from '../../ingress/http/chain.js';
import type { FullDoc, IngressDeps } from '../../ingress/types.js';
import { checkBind } from './bind.js';
import { lowerKeys, MessageError, readJson } from './json.js';
import { MuxSession, MuxStream } from './muxado.js';
import { openProxy, rawStream, RelayedRequest, type ProxyTarget } from './relay.js';
import { removeTunnels, addTunnel, takeOverSession } from './rows.js';
import { answer, errorText, readType, STREAM_TYPE } from './rpc.js';
import type { V2Gateway } from './listener.js';

/** A tunnel of the session, as proxied connections need it. */
interface Held extends ProxyTarget {
  labels?: Record<string, string>;
  forwardsTo: string;
  /** The upstream's protocol as the bind said: '', http1 or http2. */
  forwardsProto?: string;
  publicUrl?: string;
  /** The route modules the endpoint runs (bind.ts), as a route document whose id is the tunnel's. */
  route?: FullDoc;
  claimed: boolean;
  /** Issue 36: bound internal (reached through forward-internal only), and pooling enabled. */
  internal?: boolean;
  pooled?: boolean;
}

/** What a session keeps across its connections (a resumed session keeps its id and tunnels). */
export interface SessionState {
  id: string;
  credential: AgentCredential;
  /** When the session first started (kept when it is resumed, on any instance). */
  startedAt: Date;
  tunnels: Map<string, Held>;
  /** Auth's `*UnsupportedError` per command: null = the agent is too old to know it; '' = supported; text = why not. */
  unsupported: Record<Action, string | null>;
  /** The connection now serving it, if any. */
  conn?: V2Connection;
  /** While detached: the timer that ends it unless the agent resumes. */
  expiry?: NodeJS.Timeout;
}

const COMMAND_TYPE: Record<Action, number> = { restart: STREAM_TYPE.RESTART, stop: STREAM_TYPE.STOP, update: STREAM_TYPE.UPDATE };
const HEARTBEAT = 0xffffffff;

export class V2Connection implements AttachedSession {
  readonly mux: MuxSession;
  state?: SessionState;
  private authed = false;
  /** Why the server ended it (restart, stop, revoked): the session is not kept for a resume. */
  private ending?: string;
  private probe?: NodeJS.Timeout;
  private readonly ip: string;
  private readonly pools = new Map<string, RelayPool>();
  /** The reason it ends was logged already (end()). */
  private logged = false;

  constructor(private readonly gw: V2Gateway, socket: TLSSocket) {
    this.ip = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    this.mux = new MuxSession(socket, gw.opts.muxLimits, (s) => void this.accept(s), (reason) => this.closed(reason));
    const authTimer = setTimeout(() => { if (!this.authed) this.end(`no Auth within ${gw.opts.authTimeoutMs} ms`); }, gw.opts.authTimeoutMs);
    authTimer.unref();
  }

  get credential() { return this.state!.credential; }

  private end(reason: string, code = 0) {
    this.logged = true;
    this.gw.log({ level: 'info', msg: `agent connection (version 2) closed: ${reason}`, ip: this.ip, session: this.state?.id });
    this.mux.goAway(code, reason);
  }

  private async accept(s: MuxStream) {
    s.on('error', () => {});
    let type: number;
    try {
      type = await readType(s, this.gw.opts.authTimeoutMs);
    } catch {
      return void s.destroy();
    }
    if (type === HEARTBEAT) return this.echo(s);
    if (!this.authed && type !== STREAM_TYPE.AUTH) {
      this.end(`stream type ${type} before Auth`, 1);
      return;
    }
    let msg: any;
    try {
      msg = await readJson(s, this.gw.opts.authTimeoutMs);
      msg = { raw: msg, o: lowerKeys(msg) };
    } catch (e) {
      this.end(`a malformed message on a stream of type ${type}: ${(e as Error).message}`, 1);
      return;
    }
    try {
      switch (type) {
        case STREAM_TYPE.AUTH: return await this.auth(s, msg.o);
        case STREAM_TYPE.BIND: return await this.bind(s, msg.o, msg.raw);
        case STREAM_TYPE.START_TUNNEL_WITH_LABEL: return await this.bindLabeled(s, msg.o);
        case STREAM_TYPE.UNBIND: return await this.unbind(s, msg.o);
        case STREAM_TYPE.SRV_INFO: return answer(s, { Region: this.gw.opts.region });
        default:
          answer(s, { Error: errorText('ERR_SERVICE_112', `stream type ${type} is not supported by this server`) });
      }
    } catch (e) {
      if (!(e instanceof ApiError)) this.gw.log({ level: 'error', msg: `agent rpc (type ${type}) failed: ${(e as Error).stack ?? e}`, session: this.state?.id });
      const err = e instanceof ApiError ? e : new ApiError('ERR_SERVICE_500', 'the server could not carry this out; its log has the details');
      const text = errorText(err.code, err.message);
      if (type === STREAM_TYPE.BIND) answer(s, { Id: '', URL: '', Proto: '', Opts: null, Error: text, Extra: { Token: '' } });
      else answer(s, { Id: '', Error: text });
    }
  }

  /** The agent's heartbeat stream: every 4 bytes echoed (bounded: what is read is written back under the stream's flow control). */
  private echo(s: MuxStream) {
    s.on('data', (c: Buffer) => {
      if (!s.write(c)) s.pause();
    });
    s.on('drain', () => s.resume());
    s.on('end', () => s.end());
  }

  private async auth(s: MuxStream, o: any) {
    if (this.authed) return answer(s, { Version: '', ClientId: '', Error: errorText('ERR_SERVICE_110', 'this connection is authenticated already') });
    const extra = (o.extra && typeof o.extra === 'object' ? o.extra : {}) as Record<string, unknown>;
    const refuse = (e: ApiError) => {
      answer(s, { Version: '', ClientId: '', Error: errorText(e.code, e.message) });
      setTimeout(() => this.end(`Auth refused: ${e.code}`), 200).unref();
    };
    if (this.gw.stopping || this.gw.gateway.isDraining) return refuse(new ApiError('ERR_SERVICE_503', 'the server is shutting down; retry'));
    const clientId = typeof o.clientid === 'string' ? o.clientid : '';
    const ended = clientId ? await this.gw.endedReason(clientId) : undefined;
    if (ended === 'stopped') return refuse(new ApiError('ERR_SERVICE_113', `tunnel session ${clientId} was stopped (POST /tunnel_sessions/${clientId}/stop); start the application again to connect a new session`));
    let credential: AgentCredential;
    try {
      credential = await authenticateAgent(this.gw.ctx.db.prisma as never, String(extra.authtoken ?? ''));
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      const wait = e.status === 401 ? (this.gw.opts.authFailures?.take(clientKey(this.ip)) ?? 0) : 0;
      if (wait > 0) return refuse(new ApiError('ERR_SERVICE_227', `too many failed authentications from this address; retry in ${wait} s`, { retry_after: wait }));
      return refuse(e);
    }
    const unsupported = {} as Record<Action, string | null>;
    for (const a of ['restart', 'stop', 'update'] as Action[]) {
      const v = extra[`${a}unsupportederror`];
      unsupported[a] = typeof v === 'string' ? v : null;
    }
    const cookie = typeof extra.cookie === 'string' ? extra.cookie : '';
    const resumed = ended ? undefined : this.gw.resume(clientId, cookie, credential.credentialId);
    // Not held here (a restart, another instance): the cookie still vouches for the session, which keeps its id.
    const vouched = resumed || ended || !clientId ? undefined : this.gw.readCookie(cookie, clientId, credential.credentialId);
    if (resumed) {
      const old = resumed.conn;
      resumed.conn = this;
      old?.mux.close('the agent resumed the session on another connection');
      resumed.unsupported = unsupported;
      this.state = resumed;
      for (const t of resumed.tunnels.values()) t.claimed = false;
      // What is not bound again soon after a resume was closed by the application meanwhile.
      setTimeout(() => void this.dropUnclaimed(resumed), 10_000).unref();
    } else {
      const state: SessionState = { id: vouched?.id ?? newId(tunnelSession.prefix), credential, startedAt: vouched?.startedAt ?? new Date(), tunnels: new Map(), unsupported, conn: this };
      const create = () => createSession(this.gw.ctx, this.gw.gateway.instanceId, {
        id: state.id, credentialId: credential.credentialId, ip: this.ip, os: String(extra.os ?? ''), agentVersion: String(extra.version ?? ''),
        metadata: String(extra.metadata ?? ''), region: this.gw.opts.region, startedAt: state.startedAt,
      }, [], this.gw.sessionWriteOptions());
      try {
        if (!vouched || !await takeOverSession(this.gw.ctx, this.gw.gateway.instanceId, state.id, credential.credentialId)) await this.gw.admit(credential.credentialId, create);
      } catch (e) {
        if (e instanceof SessionLimit) return refuse(this.gw.sessionLimit(credential.credentialId, e.held, e.limit));
        if (e instanceof ApiError) return refuse(e);
        throw e;
      }
      if (this.mux.closed) {
        await deleteSessions(this.gw.ctx, [state.id]);
        return;
      }
      this.state = state;
      this.gw.hold(state);
    }
    this.authed = true;
    this.gw.gateway.attach(this.state.id, this);
    // An agent that asked to resume and got a new session: why (the server ended that one on purpose, or its cookie does not hold).
    const notResumed = clientId && !resumed && !vouched ? { not_resumed: clientId, why: ended ? `the server ended it (${ended})` : 'its resume cookie is not valid here' } : {};
    this.gw.log({ level: 'info', msg: resumed || vouched ? 'agent session resumed (version 2)' : 'agent session started (version 2)', session: this.state.id, credential: credential.credentialId, ip: this.ip, client: String(extra.clienttype ?? ''), ...notResumed });
    answer(s, {
      Version: '3', ClientId: this.state.id,
      Extra: { Version: this.gw.opts.version, Region: this.gw.opts.region, Cookie: this.gw.cookieFor(this.state), AccountName: '', SessionDuration: 0, PlanName: '', Banner: '', AgentSessionID: this.state.id },
    });
    this.startProbe();
  }

  /** The server's own heartbeat stream: a probe every half interval; one unanswered when the next is due ends the connection. */
  private startProbe() {
    let stream: MuxStream;
    try {
      stream = this.mux.open();
    } catch {
      return;
    }
    stream.on('error', () => {});
    const type = Buffer.alloc(4);
    type.writeUInt32BE(HEARTBEAT, 0);
    stream.write(type);
    let outstanding = 0;
    stream.on('data', (c: Buffer) => { outstanding = Math.max(0, outstanding - c.length); });
    this.probe = setInterval(() => {
      if (outstanding > 0 && Date.now() - this.mux.lastFrameAt >= this.gw.opts.heartbeatMs / 2) return this.mux.close('the agent stopped answering heartbeats');
      outstanding += 4;
      stream.write(randomBytes(4));
    }, Math.max(50, this.gw.opts.heartbeatMs / 2));
    this.probe.unref();
  }

  private async bind(s: MuxStream, o: any, raw: any) {
    const st = this.state!;
    const id = typeof o.id === 'string' ? o.id : '';
    const extra = (o.extra && typeof o.extra === 'object' ? o.extra : {}) as Record<string, unknown>;
    const reply = (t: Held) => {
      const opts = { ...(raw.Opts ?? raw.opts ?? {}) } as Record<string, unknown>;
      const url = new URL(t.publicUrl!);
      if (t.proto === 'tcp') opts.Addr = url.host;
      else {
        opts.Hostname = url.hostname;
        opts.Domain = url.hostname;
      }
      answer(s, { Id: t.id, URL: t.publicUrl, Proto: t.proto, Opts: opts, Extra: { Token: this.gw.bindToken(st, t), TunnelID: t.id } });
    };
    // A rebind after a resume: the same tunnel, the same URL.
    const held = id ? st.tunnels.get(id) : undefined;
    if (held && !held.labeled) {
      held.claimed = true;
      return reply(held);
    }
    const ask = checkBind(o, this.gw.opts.endpointDomain, this.gw.opts.tcpPorts);
    // A TCP or TLS endpoint's connections are checked against its IP restriction only (ingress/agent-tcp.ts, agent-endpoints.ts).
    const httpOnly = Object.keys(ask.modules).filter((m) => m !== 'ip_restriction');
    if ((ask.proto === 'tcp' || ask.proto === 'tls') && httpOnly.length) throw new ApiError('ERR_SERVICE_112', `a ${ask.proto.toUpperCase()} endpoint runs no HTTP modules (${httpOnly.join(', ')}); only an IP restriction`);
    // A rebind on a new session (the old one ended): the id and URL its token vouches for.
    const vouched = id ? this.gw.readBindToken(String(extra.token ?? ''), st.credential.credentialId, id) : undefined;
    const range = this.gw.opts.tcpPorts;
    // An internal endpoint's URL is its name alone (no listener serves it; forward-internal names it so).
    const pick = () => (ask.proto === 'tcp' ? `tcp://${ask.hostname}:${ask.port ?? randomInt(range!.first, range!.last + 1)}` : ask.internal ? `${ask.proto}://${ask.hostname}` : this.gw.gateway.endpointUrl(ask.proto, ask.hostname));
    let publicUrl = vouched?.url ?? pick();
    const host = new URL(publicUrl).hostname;
    if (!bindAllowed(st.credential.acl, {}, host)) throw new ApiError('ERR_SERVICE_212', refusal(st.credential.acl, { name: host }, host));
    const tunnelId = vouched ? id : newId('tn');
    const route = Object.keys(ask.modules).length ? checkModules(this.gw, { id: tunnelId, ...ask.modules }) : undefined;
    const row: TunnelRow = { id: tunnelId, name: host, metadata: String(extra.metadata ?? ''), forwardsTo: String(o.forwardsto ?? ''), proto: ask.proto, endpoint: { id: newId('ep'), publicUrl, pooled: ask.pooled, internal: ask.internal } };
    // A free port is drawn again while the one drawn is taken (20 draws at most).
    for (let draw = 0; ; draw++) {
      try {
        await addTunnel(this.gw.ctx, st.id, this.gw.opts.region, row, () => this.gw.staleBefore());
        break;
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 'ERR_SERVICE_320' && ask.proto === 'tcp' && !ask.port && !vouched && draw < 20)) throw e;
        row.endpoint!.publicUrl = publicUrl = pick();
      }
    }
    const t: Held = { id: row.id, proto: ask.proto, labeled: false, forwardsTo: row.forwardsTo, forwardsProto: String(o.forwardsproto ?? ''), publicUrl, route, claimed: true, internal: ask.internal, pooled: ask.pooled };
    if (!await this.keep(t)) return;
    this.gw.log({ level: 'info', msg: 'agent tunnel bound (version 2)', session: st.id, tunnel: t.id, url: publicUrl });
    reply(t);
  }

  private async bindLabeled(s: MuxStream, o: any) {
    const st = this.state!;
    const labels: Record<string, string> = {};
    if (!o.labels || typeof o.labels !== 'object' || Array.isArray(o.labels)) throw new ApiError('ERR_SERVICE_103', 'a labeled tunnel needs Labels: an object of strings');
    // Label names keep their case (keys were lower-cased for matching): read them from the raw entries.
    for (const [k, v] of Object.entries(o.labels)) {
      if (typeof v !== 'string' || !k) throw new ApiError('ERR_SERVICE_103', 'a labeled tunnel needs Labels: an object of strings');
      labels[k] = v;
    }
    if (!Object.keys(labels).length) throw new ApiError('ERR_SERVICE_103', 'a labeled tunnel needs at least one label');
    const key = JSON.stringify(Object.entries(labels).sort());
    // After a resume: the tunnel with these labels is the one the agent binds again (its id kept).
    for (const t of st.tunnels.values()) {
      if (t.labeled && !t.claimed && JSON.stringify(Object.entries(t.labels!).sort()) === key) {
        t.claimed = true;
        return answer(s, { Id: t.id });
      }
      if (t.labeled && JSON.stringify(Object.entries(t.labels!).sort()) === key) throw new ApiError('ERR_SERVICE_326', `this session already has a tunnel with the labels ${key}`);
    }
    const name = Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(',');
    if (!bindAllowed(st.credential.acl, { labels })) throw new ApiError('ERR_SERVICE_212', refusal(st.credential.acl, { name, labels }));
    const row: TunnelRow = { id: newId('tn'), name, metadata: String(o.metadata ?? ''), forwardsTo: String(o.forwardsto ?? ''), labels };
    await addTunnel(this.gw.ctx, st.id, this.gw.opts.region, row, () => this.gw.staleBefore());
    const t: Held = { id: row.id, proto: 'https', labeled: true, labels, forwardsTo: row.forwardsTo, forwardsProto: String(o.forwardsproto ?? ''), claimed: true };
    if (!await this.keep(t)) return;
    this.gw.log({ level: 'info', msg: 'agent labeled tunnel bound (version 2)', session: st.id, tunnel: t.id, labels: name });
    answer(s, { Id: t.id });
  }

  /** Registers a written tunnel; false (and the row deleted) when the connection went meanwhile. */
  private async keep(t: Held): Promise<boolean> {
    const st = this.state!;
    if (this.mux.closed && st.conn === this && !this.gw.isDetached(st)) {
      await removeTunnels(this.gw.ctx, [t.id]);
      return false;
    }
    st.tunnels.set(t.id, t);
    this.gw.gateway.addTunnel(st.id, t.id, { labels: t.labels, publicUrl: t.publicUrl, proto: t.proto, route: t.route, internal: t.internal, pooled: t.pooled });
    return true;
  }

  private async unbind(s: MuxStream, o: any) {
    const st = this.state!;
    const id = typeof o.id === 'string' ? o.id : '';
    if (!st.tunnels.has(id)) return answer(s, { Error: errorText('ERR_SERVICE_300', `no tunnel ${id} in this session`) });
    st.tunnels.delete(id);
    this.gw.gateway.dropTunnel(id);
    await removeTunnels(this.gw.ctx, [id]);
    answer(s, {});
  }

  private async dropUnclaimed(st: SessionState) {
    if (st.conn !== this || this.mux.closed) return;
    const gone = [...st.tunnels.values()].filter((t) => !t.claimed).map((t) => t.id);
    for (const id of gone) {
      st.tunnels.delete(id);
      this.gw.gateway.dropTunnel(id);
    }
    await removeTunnels(this.gw.ctx, gone).catch((e) => this.gw.log({ level: 'warn', msg: `could not delete tunnels not bound again: ${(e as Error).message}` }));
  }

  /** An API command: refused at once when the agent said it cannot carry it out; else sent, and carried out here after the acknowledgement. */
  async command(action: Action): Promise<void> {
    const st = this.state!;
    if (this.mux.closed) throw notFound('tunnel session', st.id);
    const why = st.unsupported[action];
    if (why === null) throw new ApiError('ERR_SERVICE_332', `the agent of tunnel session ${st.id} does not know the ${action} command (it is too old)`);
    if (why) throw new ApiError('ERR_SERVICE_332', `the agent of tunnel session ${st.id} cannot ${action}: ${why}`);
    const stream = this.mux.open();
    stream.on('error', () => {});
    const type = Buffer.alloc(4);
    type.writeUInt32BE(COMMAND_TYPE[action], 0);
    stream.write(Buffer.concat([type, Buffer.from(JSON.stringify(action === 'update' ? { Version: '', PermitMajorVersion: false } : {}))]));
    let reply: any;
    try {
      reply = lowerKeys(await readJson(stream, this.gw.opts.commandTimeoutMs));
    } catch (e) {
      stream.destroy();
      if (this.mux.closed) throw notFound('tunnel session', st.id);
      if (e instanceof MessageError && /within/.test(e.message)) throw new ApiError('ERR_SERVICE_504', `the agent of tunnel session ${st.id} did not acknowledge ${action} within ${this.gw.opts.commandTimeoutMs / 1000} s; it may be stuck or on a slow link: retry`);
      throw new ApiError('ERR_SERVICE_504', `the agent of tunnel session ${st.id} did not acknowledge ${action}: ${(e as Error).message}`);
    }
    stream.end();
    if (typeof reply?.error === 'string' && reply.error) throw new ApiError('ERR_SERVICE_332', `the agent of tunnel session ${st.id} refused ${action}: ${reply.error}`);
    this.gw.log({ level: 'info', msg: `agent acknowledged ${action}`, session: st.id });
    // An application embedding the SDK cannot exec itself: the server carries it out.
    // Recorded before the session ends, so that the agent's reconnect (on any instance) finds it.
    if (action === 'restart') {
      await this.gw.markEnded(st.id, 'restarted');
      this.finish('restarted by POST /tunnel_sessions/{id}/restart: reconnect for a new session');
    }
    if (action === 'stop') {
      await this.gw.markEnded(st.id, 'stopped');
      this.finish('stopped by POST /tunnel_sessions/{id}/stop');
    }
  }

  /** Ends the session for good (no resume): GOAWAY after the acknowledgement has gone out. */
  private finish(reason: string) {
    this.ending = reason;
    setTimeout(() => this.end(reason), 50).unref();
  }

  close(why?: ApiError) {
    this.ending = why ? `${why.code}: ${why.message}` : 'closed by the server';
    if (why && this.state) {
      const id = this.state.id;
      void this.gw.markEnded(id, 'stopped').catch((e) => this.gw.log({ level: 'warn', msg: `could not record the end of session ${id}: ${(e as Error).message}` }));
    }
    this.end(this.ending, 0);
  }

  /** Closes the connection of a session another instance took over (the gateway let go of it already). */
  release() {
    this.end('the agent resumed its session on another instance');
  }

  private closed(reason: string) {
    clearInterval(this.probe);
    for (const p of this.pools.values()) p.closeAll();
    this.pools.clear();
    const st = this.state;
    // Closed for bad input (muxado.ts) or by the peer before a session was made: the reason is logged.
    if (!st && !this.logged) this.gw.log({ level: 'warn', msg: `agent connection (version 2) closed: ${reason}`, ip: this.ip });
    if (!st || st.conn !== this) return;
    if (this.ending || this.gw.stopping) {
      this.gw.log({ level: 'info', msg: 'agent session closed (version 2)', session: st.id, reason: this.ending ?? reason });
      this.gw.endSession(st);
    } else {
      this.gw.log({ level: 'info', msg: `agent connection lost (version 2): ${reason}; the session is kept for a resume`, session: st.id });
      this.gw.detach(st);
    }
  }

  private target(tunnelId: string): Held {
    const t = this.state?.tunnels.get(tunnelId);
    if (!t || this.mux.closed) throw notFound('tunnel', tunnelId);
    return t;
  }

  openStream(tunnelId: string, req: { method: string; path: string; headers?: Record<string, string | string[] | undefined>; endStream?: boolean }): ClientHttp2Stream {
    const t = this.target(tunnelId);
    const forwarded = req.headers?.['x-forwarded-for'];
    const client = String(Array.isArray(forwarded) ? forwarded[0] : forwarded ?? '').split(',').pop()?.trim() || '0.0.0.0';
    const conn = openProxy(this.mux, t, `${client.includes(':') ? `[${client}]` : client}:0`);
    return new RelayedRequest(conn, req) as unknown as ClientHttp2Stream;
  }

  /**
   * Pooled keep-alive connections per tunnel (relay-pool.ts, --agent-relay-pool): each a proxied
   * connection the SDK joined to its upstream, over which the server speaks HTTP/1.1 itself.
   * Not for tunnels whose upstream may not be plain HTTP/1.1 (tcp, tls, an http2 upstream).
   */
  takePooled(tunnelId: string, poolSize: number): { conn: PooledConnection; prefix: string } | undefined {
    const t = this.target(tunnelId);
    if (t.proto === 'tcp' || t.proto === 'tls' || t.forwardsProto === 'http2' || !/^(https?|app):\/\//.test(t.forwardsTo) && t.forwardsTo !== '') return undefined;
    let pool = this.pools.get(tunnelId);
    if (!pool) this.pools.set(tunnelId, pool = new RelayPool(poolSize, async () => openProxy(this.mux, t, '0.0.0.0:0') as unknown as ClientHttp2Stream));
    const conn = pool.take();
    return conn && { conn, prefix: '' };
  }

  openTcp(tunnelId: string): ClientHttp2Stream {
    return rawStream(openProxy(this.mux, this.target(tunnelId), '0.0.0.0:0')) as unknown as ClientHttp2Stream;
  }
}

/**
 * The endpoint's route modules, built once as the ingress will build them: one that cannot run
 * (a webhook provider it does not know, a policy that does not compile) refuses the bind.
 */
function checkModules(gw: V2Gateway, route: FullDoc): FullDoc {
  const problems: string[] = [];
  const deps = { gateway: gw.gateway, policyState: new PolicyState(), box: gw.ctx.box, log: (f: Record<string, unknown>) => { problems.push(String(f.msg)); }, now: Date.now } as IngressDeps;
  const built = buildChain(route, deps);
  if (!Array.isArray(built)) throw new ApiError('ERR_SERVICE_112', `the endpoint's protections cannot run: ${problems.join('; ') || String(built.body ?? '').trim()}`);
  return route;
}

/** Constant-time comparison of two MACs. */
export function sameMac(a: string, b: string) {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export const mac = (key: Buffer, text: string) => createHmac('sha256', key).update(text).digest('base64url');
