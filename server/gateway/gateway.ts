// The agent gateway: accepts agent connections on the API port (an HTTP/1.1 Upgrade to
// `edgeform-agent/2` at /_edgeform/agent), authenticates them by credential, turns each
// hello into a live session with its tunnels, keeps them alive (pings, leases), relays
// commands (across instances through the bus) and offers streams to the future ingress.
import { randomBytes, randomInt } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { ClientHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { AGENT_PATH, CONTROL, hello as helloSchema, httpUpstreamOf, UPGRADE_TOKEN, type Action, type Bound, type BoundTunnel, type Hello, type TunnelConfig } from '../../agent/protocol.js';
import { tunnelSession } from '../../provider/catalog/tunnels.js';
import { isInternalHost, parseEndpointUrl } from '../../provider/catalog/validate/endpoint-url.js';
import { ApiError, ERRORS, notFound, type ErrorCode } from '../http/errors.js';
import type { ServerContext } from '../resources/context.js';
import { newId, newIdBody } from '../store/ids.js';
import { bindAllowed, refusal } from './acl.js';
import { clientKey, type RateLimiter } from '../http/rate-limit.js';
import { authenticateAgent, checkOwnerActive, type AgentCredential } from './auth.js';
import { agentBundle } from './bundle.js';
import { busFor, type Bus, type BusReply } from './bus.js';
import type { FullDoc } from '../ingress/types.js';
import { Turns } from '../ingress/backends/tunnel-group.js';
import { AgentConnection, TimeoutError } from './connection.js';
import { DEFAULT_RELAY_POOL, type PooledConnection } from './relay-pool.js';
import { RESET_PACE } from './reset-pacer.js';
import type { Peers } from './peers/peers.js';
import type { PeerLink } from './peers/link.js';
import type { LocalHolder, PeerRequest, SharedTunnel } from './peers/protocol.js';
import { createSession, deleteSessions, endpointKey, holderOf, renewLeases, SessionLimit, sessionsOf, staleSessions, type TakenEndpoint, type TunnelRow } from './live-rows.js';

export interface GatewayOptions {
  /** Agent heartbeat interval (ms): pings every half; a session is gone within one interval after its agent. */
  heartbeatMs: number;
  /** The `region` of sessions and tunnels started here. */
  region: string;
  /** Domain under which ephemeral endpoints get their hostnames. */
  endpointDomain: string;
  /** How long a command waits for the agent's acknowledgement before 504. */
  commandTimeoutMs: number;
  /** How long an agent has to answer hello after the upgrade. */
  helloTimeoutMs: number;
  /** The server's version: the agent bundle's version. */
  version: string;
  databaseUrl: string;
  log: (fields: Record<string, unknown>) => void;
  /** Failed authentications per client address, shared with the API (ERR_SERVICE_227 past the limit). */
  authFailures?: RateLimiter;
  /** Sessions one credential may hold at once, all instances together (ERR_SERVICE_840 past it); 0 for no limit. */
  maxSessionsPerCredential: number;
  /** Ports of agents' TCP endpoints (--agent-tcp-ports); without it a TCP endpoint gets a random port nothing serves. */
  tcpPorts?: { first: number; last: number };
  /** Pooled upstream connections per tunnel of a session for relayed HTTP requests (relay-pool.ts); 0: each request is its own stream. */
  relayPool?: number;
  /** The pace of cancels toward each agent and its backlog bounds (reset-pacer.ts); tests make them small. */
  resetPace?: Partial<import('./reset-pacer.js').ResetPace>;
  /**
   * The public URL of an http, https or tls endpoint on `host`, as the ingress serves it
   * (endpointUrlMaker: the scheme and port of the listeners configured); default `proto://host`.
   */
  endpointUrl?: (proto: string, host: string) => string;
  /** --peer-choice: `prefer-local` takes a tunnel-group's tunnels of this instance first, another instance's only when none is up. */
  peerChoice?: PeerChoice;
}

export type PeerChoice = 'round-robin' | 'prefer-local';

/**
 * The URL an agent's http, https or tls endpoint answers at, given the ingress's listeners:
 * https on the TLS listener for public port 443 (else the first `--ingress`), the port written
 * when it is not 443; http on the plain-HTTP listener for port 80 (else the first
 * `--ingress-http`), and when there is none, https on the TLS listener (which serves http
 * endpoints too). With no listener at all, `proto://host`.
 */
export function endpointUrlMaker(tlsPorts: number[], plainPorts: number[]): (proto: string, host: string) => string {
  const tls = tlsPorts.includes(443) ? 443 : tlsPorts[0];
  const plain = plainPorts.includes(80) ? 80 : plainPorts[0];
  const at = (scheme: string, host: string, port: number | undefined, standard: number) => `${scheme}://${host}${port === undefined || port === standard ? '' : `:${port}`}`;
  return (proto, host) => {
    if (proto === 'http' && plain !== undefined) return at('http', host, plain, 80);
    if (proto === 'http' && tls !== undefined) return at('https', host, tls, 443);
    if (proto === 'https' || proto === 'tls') return at(proto, host, tls, 443);
    return `${proto}://${host}`;
  };
}

/**
 * A session another transport holds (the version-2 listener, gateway/v2): its leases are
 * renewed, its credential re-checked, commands and relayed streams reach it through here, as
 * for this gateway's own sessions.
 */
export interface AttachedSession {
  credential: AgentCredential;
  /** Carries out an API command; resolves once the agent acknowledged it (errors as localCommand's). */
  command(action: Action): Promise<void>;
  /** Ends the session, telling the agent why when the protocol can. */
  close(why?: ApiError): void;
  openStream(tunnelId: string, req: { method: string; path: string; headers?: Record<string, string | string[] | undefined>; endStream?: boolean }): ClientHttp2Stream;
  openTcp(tunnelId: string): ClientHttp2Stream;
  /** An idle pooled connection to the tunnel's upstream (relay-pool.ts), or undefined. */
  takePooled?(tunnelId: string, poolSize: number): { conn: PooledConnection; prefix: string } | undefined;
}

interface Live {
  conn: AgentConnection;
  credential: AgentCredential;
  tunnels: Set<string>;
  agentVersion: string;
}

/** How often credentials of held sessions are re-checked: a deleted one closes its sessions within a second. */
const REVALIDATE_MS = 400;

export class Gateway implements LocalHolder {
  readonly instanceId = newIdBody();
  private sessions = new Map<string, Live>();
  private tunnels = new Map<string, string>();
  /** Path prefixes of the tunnels whose forwards_to is plain HTTP (the ones pooled connections serve). */
  private plainHttp = new Map<string, string>();
  /** Relayed HTTP requests by how they went: over a pooled connection, or as their own stream (GET /metrics). */
  readonly relayed = { pooled: 0, stream: 0 };
  /** Labeled tunnels held here, by id: what tunnel-group backends choose among (the ingress). */
  private labeled = new Map<string, Readonly<Record<string, string>>>();
  private timers: NodeJS.Timeout[] = [];
  /** Deletes of closed sessions still being written: stop() waits for them before the database closes. */
  private deleting = new Set<Promise<void>>();
  private bus: Bus;
  private stopping = false;
  /** Sessions being set up here (upgraded, not yet written), per credential: counted against its limit too. */
  private connecting = new Map<string, number>();
  /** Sessions of other transports (gateway/v2), by id. */
  private attached = new Map<string, AttachedSession>();
  /** Endpoint hostnames of tunnels held here (http, https, tls), for the ingress (ingress/agent-endpoints.ts). */
  private endpointHosts = new Map<string, string>();
  private hostOf = new Map<string, string>();
  /**
   * Pools (issue 36) held here: endpoints with pooling enabled by their key (a hostname, or
   * `tcp:PORT`), and internal endpoints (pooled or not) by `internal:URL`; the members by tunnel,
   * in the order they came. With peers, the other instances' members join (poolMembers).
   */
  private pools = new Map<string, Set<string>>();
  private poolOf = new Map<string, string>();
  /** The next turn of each pool (per instance). */
  private turns = new Turns();
  /** The route modules an endpoint runs (asked for by its agent, gateway/v2/bind.ts), by tunnel. */
  private endpointRoutes = new Map<string, FullDoc>();
  /** Endpoints whose TLS passes through to the agent (proto tls), by tunnel. */
  private tlsEndpoints = new Set<string>();
  /** The proto (http, https, tls, tcp) of each endpoint's tunnel online here: a plain-HTTP listener serves http ones only. */
  private endpointProtos = new Map<string, string>();
  /** The tunnels other holders (instances: peers/) have, when this instance has peers. */
  private peers?: Peers;
  /** Local and remote labeled tunnels together, rebuilt after a change of either (undefined: stale). */
  private merged?: Map<string, Readonly<Record<string, string>>>;
  /** Who is told when the tunnels held here change (peer watches, peers/server.ts). */
  private tunnelWatchers = new Set<() => void>();
  /** Draining (SIGTERM): new agent connections are refused, held ones told to reconnect elsewhere. */
  private draining = false;
  /** Who is told when the tunnels this gateway reaches (its own and its peers') change: ingress workers (server/cluster/primary.ts). */
  private reachableWatchers = new Set<() => void>();

  constructor(private ctx: ServerContext, private opts: GatewayOptions) {
    this.bus = busFor(ctx.db, opts.databaseUrl, this.instanceId, (msg) => opts.log({ level: 'warn', msg }));
  }

  async start(server: Server) {
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      this.onUpgrade(req, socket, head).catch((e) => {
        this.opts.log({ level: 'error', msg: `agent connection failed: ${(e as Error).message}` });
        socket.destroy();
      });
    });
    await this.bus.start((session, action) => this.localCommand(session, action as Action).then(() => ({ ok: true }), toReply));
    const every = (ms: number, fn: () => Promise<unknown>) => {
      let running = false;
      const t = setInterval(() => {
        if (running) return;
        running = true;
        fn().catch((e) => this.opts.log({ level: 'warn', msg: `gateway: ${(e as Error).message}` })).finally(() => { running = false; });
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    // Leases: renewed every fifth of the interval, stale after three fifths; so sessions of a
    // crashed instance are swept within one interval by any instance still running.
    const tick = this.leaseTick;
    every(tick, async () => {
      const held = [...this.sessions.keys(), ...this.attached.keys()];
      if (held.length) {
        const renewed = await renewLeases(this.ctx, this.instanceId, held);
        // A lease swept by another instance (this one stalled): the agent reconnects afresh.
        if (renewed < held.length) for (const id of await this.lostLeases(held)) { this.sessions.get(id)?.conn.destroy(); this.attached.get(id)?.close(); }
      }
      await deleteSessions(this.ctx, (await staleSessions(this.ctx, new Date(Date.now() - 3 * tick))).filter((id) => !this.sessions.has(id) && !this.attached.has(id)));
    });
    every(REVALIDATE_MS, () => this.revalidate());
  }

  async stop() {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    const held = [...this.sessions.values()];
    for (const s of held) s.conn.destroy();
    await Promise.all(held.map((s) => s.conn.done));
    await Promise.all(this.deleting);
    await this.bus.stop();
  }

  /** Leases are renewed every fifth of the heartbeat interval, and stale after three of these ticks. */
  private get leaseTick() { return Math.max(20, Math.floor(this.opts.heartbeatMs / 5)); }

  /** The bus between instances (LISTEN/NOTIFY on PostgreSQL): its connection's state and how often it was lost (/healthz, /metrics). */
  get busState() { return { state: this.bus.state, reconnects: this.bus.reconnects }; }

  /** Sessions held here (for the bench and tests). */
  get sessionCount() { return this.sessions.size; }

  private async lostLeases(held: string[]) {
    const rows = await this.ctx.db.prisma.agentLease.findMany({ where: { sessionId: { in: held } }, select: { sessionId: true } });
    const have = new Set(rows.map((r) => r.sessionId));
    return held.filter((id) => !have.has(id));
  }

  private async onUpgrade(req: IncomingMessage, socket: Socket, head: Buffer) {
    socket.on('error', () => {});
    const path = (req.url ?? '').split('?')[0];
    const refuse = (e: ApiError) => writeHttpError(socket, e);
    if (path !== AGENT_PATH) return refuse(new ApiError('ERR_SERVICE_301', `no such path for an upgrade: ${path}; agents connect to ${AGENT_PATH}`));
    if (String(req.headers.upgrade ?? '').toLowerCase() !== UPGRADE_TOKEN) return refuse(new ApiError('ERR_SERVICE_109', `${AGENT_PATH} upgrades only to ${UPGRADE_TOKEN}`));
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!bearer) return refuse(new ApiError('ERR_SERVICE_201', 'send Authorization: Bearer <credential token> (--authtoken)'));
    const version = req.headers['service-version'];
    if (version === undefined) return refuse(new ApiError('ERR_SERVICE_218', 'the Service-Version header is missing; send Service-Version: 2'));
    if (version !== '2') return refuse(new ApiError('ERR_SERVICE_217', `Service-Version ${JSON.stringify(version)} is not supported; send Service-Version: 2`));
    if (this.stopping || this.draining) return refuse(new ApiError('ERR_SERVICE_503', 'the server is shutting down; retry'));
    let credential: AgentCredential;
    try {
      credential = await authenticateAgent(this.ctx.db.prisma as never, bearer[1]);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      // A presented token that did not authenticate counts against the address, as on the API.
      const wait = e.status === 401 ? (this.opts.authFailures?.take(clientKey(socket.remoteAddress ?? '')) ?? 0) : 0;
      if (wait > 0) return refuse(new ApiError('ERR_SERVICE_227', `too many failed authentications from this address; retry in ${wait} s`, { retry_after: wait }, { 'Retry-After': String(wait) }));
      return refuse(e);
    }
    // The credential's sessions, on every instance and being set up here: a leaked token opens a
    // bounded number. The ones being set up are read after the count's await and taken in the
    // same turn, so connections arriving together are counted one after the other.
    const limit = this.opts.maxSessionsPerCredential;
    const credentialId = credential.credentialId;
    if (limit > 0) {
      const held = (await sessionsOf(this.ctx, credentialId)) + (this.connecting.get(credentialId) ?? 0);
      if (held >= limit) return refuse(sessionLimit(credentialId, held, limit));
    }
    this.connecting.set(credentialId, (this.connecting.get(credentialId) ?? 0) + 1);
    let counted = true;
    // Once its row (and place) is written, or it failed, a session is no longer counted as being set up.
    const written = () => {
      if (!counted) return;
      counted = false;
      const left = (this.connecting.get(credentialId) ?? 1) - 1;
      if (left > 0) this.connecting.set(credentialId, left);
      else this.connecting.delete(credentialId);
    };
    try {
      await this.serveSession(socket, head, credential, written);
    } finally {
      written();
    }
  }

  /** After authentication: the upgrade, the hello, the session's rows (then `written()`), then `bound`. */
  private async serveSession(socket: Socket, head: Buffer, credential: AgentCredential, written: () => void) {
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${UPGRADE_TOKEN}\r\nConnection: Upgrade\r\n\r\n`);
    if (head.length) socket.unshift(head);
    socket.setNoDelay(true);
    const sessionId = newId(tunnelSession.prefix);
    const live: Live = { conn: undefined as never, credential, tunnels: new Set(), agentVersion: '' };
    let registered = false;
    const pace = this.opts.resetPace ? { ...RESET_PACE, ...this.opts.resetPace } : RESET_PACE;
    const conn = new AgentConnection(socket, this.opts.heartbeatMs, () => {
      if (!registered) return;
      this.sessions.delete(sessionId);
      for (const t of live.tunnels) this.dropTunnel(t);
      this.opts.log({ level: 'info', msg: 'agent session closed', session: sessionId });
      const done = deleteSessions(this.ctx, [sessionId])
        .catch((e) => this.opts.log({ level: 'warn', msg: `could not delete session ${sessionId} (the sweeper will): ${(e as Error).message}` }))
        .finally(() => this.deleting.delete(done));
      this.deleting.add(done);
    }, pace);
    live.conn = conn;
    let hello: Hello;
    try {
      const reply = await conn.control(CONTROL.hello, { heartbeat_ms: this.opts.heartbeatMs, server_version: this.opts.version }, this.opts.helloTimeoutMs);
      const parsed = helloSchema.safeParse(reply.body);
      if (reply.status !== 200 || !parsed.success) {
        const issue = parsed.success ? undefined : parsed.error.issues[0];
        throw new ApiError('ERR_SERVICE_110', `the agent's hello is malformed${issue ? ` at ${issue.path.join('.') || '(root)'}: ${issue.message}` : ` (status ${reply.status})`}; upgrade the agent`);
      }
      hello = parsed.data;
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError('ERR_SERVICE_110', e instanceof TimeoutError ? `no hello within ${this.opts.helloTimeoutMs} ms` : `the hello failed: ${(e as Error).message}`);
      await this.closeFor(conn, err);
      return;
    }
    live.agentVersion = hello.agent_version;
    const { rows: asked, results } = this.bind(credential, hello.tunnels);
    const ip = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    let taken: TakenEndpoint[];
    try {
      taken = await createSession(this.ctx, this.instanceId, {
        id: sessionId, credentialId: credential.credentialId, ip, os: hello.os, agentVersion: hello.agent_version,
        metadata: hello.metadata, region: this.opts.region, startedAt: new Date(),
      }, asked, {
        repick: () => this.tcpUrl(), staleBefore: () => new Date(Date.now() - 3 * this.leaseTick), staleAfterMs: 3 * this.leaseTick,
        maxPerCredential: this.opts.maxSessionsPerCredential,
      });
    } catch (e) {
      written();
      // Another instance (or connection) took the credential's last session meanwhile.
      if (!(e instanceof SessionLimit)) throw e;
      await this.closeFor(conn, sessionLimit(credential.credentialId, e.held, e.limit));
      return;
    }
    written();
    const rows = settleTaken(sessionId, asked, results, taken);
    if (conn.isClosed) {
      await deleteSessions(this.ctx, [sessionId]);
      return;
    }
    registered = true;
    this.sessions.set(sessionId, live);
    for (const r of rows) live.tunnels.add(r.id);
    // The tunnels take traffic only once the agent has acknowledged `bound`: before that it does
    // not know their ids, and a request routed to it (here, or through a peer watching this
    // instance's tunnels) would be answered 404 "no such tunnel", e.g. while a draining
    // instance's agents move here.
    const bound: Bound = { session_id: sessionId, tunnels: results };
    const acknowledged = await conn.control(CONTROL.bound, bound, this.opts.helloTimeoutMs).then(() => true, () => false);
    if (!acknowledged) { conn.destroy(); return; }
    if (conn.isClosed) return;
    for (const r of rows) {
      this.tunnels.set(r.id, sessionId);
      if (r.labels) this.labeled.set(r.id, r.labels);
      const prefix = r.proto === undefined || r.proto === 'http' ? plainPrefix(r.forwardsTo) : undefined;
      if (prefix !== undefined) this.plainHttp.set(r.id, prefix);
      if (r.endpoint) this.addEndpoint(r.id, r.endpoint.publicUrl, r.proto, r.endpoint);
    }
    this.tunnelsChanged();
    this.opts.log({ level: 'info', msg: 'agent session started', session: sessionId, credential: credential.credentialId, ip, tunnels: rows.length, refused: results.filter((r) => r.error).length });
  }

  /** Checks each tunnel against the acl and the session's other tunnels. */
  private bind(credential: AgentCredential, configs: TunnelConfig[]): { rows: TunnelRow[]; results: BoundTunnel[] } {
    const rows: TunnelRow[] = [];
    const results: BoundTunnel[] = [];
    const labelSets = new Set<string>();
    const names = new Set<string>();
    for (const t of configs) {
      const fail = (code: ErrorCode, msg: string) => results.push({ name: t.name, error: { error_code: code, msg } });
      if (names.has(t.name)) { fail('ERR_SERVICE_326', `tunnel "${t.name}": the name is used twice in this session`); continue; }
      names.add(t.name);
      if (t.labels) {
        const key = JSON.stringify(Object.entries(t.labels).sort());
        if (labelSets.has(key)) { fail('ERR_SERVICE_326', `tunnel "${t.name}": this session already has a tunnel with the labels ${labelText(t.labels)}`); continue; }
        if (!bindAllowed(credential.acl, t)) { fail('ERR_SERVICE_212', refusal(credential.acl, t)); continue; }
        labelSets.add(key);
        const row: TunnelRow = { id: newId('tn'), name: t.name, metadata: t.metadata, forwardsTo: t.forwards_to, labels: t.labels };
        rows.push(row);
        results.push({ name: t.name, id: row.id });
        continue;
      }
      const proto = t.proto!;
      // Issue 36: an internal endpoint (a name under .internal, --binding internal) is reached
      // only through forward-internal: its URL is its name (and a TCP one's port), no listener's.
      const asked = t.hostname?.toLowerCase();
      const internal = !!asked && isInternalHost(asked);
      if (t.bindings?.[0] === 'internal' && !internal) { fail('ERR_SERVICE_103', `tunnel "${t.name}": an internal endpoint needs a URL under .internal (--url https://api.internal)`); continue; }
      if (t.bindings?.[0] === 'public' && internal) { fail('ERR_SERVICE_103', `tunnel "${t.name}": ${asked} is under .internal, which is bound internal, not public`); continue; }
      if (proto === 'tcp' && internal !== (t.port !== undefined)) { fail('ERR_SERVICE_103', `tunnel "${t.name}": an internal TCP endpoint needs its port (--url tcp://NAME.internal:PORT), and only an internal one names a port`); continue; }
      const host = proto === 'tcp' && !internal ? this.opts.endpointDomain : (asked ?? `${randomBytes(6).toString('hex')}.${this.opts.endpointDomain}`);
      if (!bindAllowed(credential.acl, t, host)) { fail('ERR_SERVICE_212', refusal(credential.acl, t, host)); continue; }
      const publicUrl = internal ? (proto === 'tcp' ? `tcp://${host}:${t.port}` : `${proto}://${host}`) : proto === 'tcp' ? this.tcpUrl() : this.endpointUrl(proto, host);
      const row: TunnelRow = { id: newId('tn'), name: t.name, metadata: t.metadata, forwardsTo: t.forwards_to, proto, endpoint: { id: newId('ep'), publicUrl, pooled: t.pooling_enabled === true, internal } };
      rows.push(row);
      results.push({ name: t.name, id: row.id, public_url: publicUrl });
    }
    return { rows, results };
  }

  /** The public URL of an http, https or tls endpoint on `host` (GatewayOptions.endpointUrl). */
  endpointUrl(proto: string, host: string): string {
    return this.opts.endpointUrl ? this.opts.endpointUrl(proto, host) : `${proto}://${host}`;
  }

  /** A TCP endpoint's address: the endpoint domain and a random port (another is drawn while one is taken). */
  private tcpUrl() {
    const range = this.opts.tcpPorts;
    return `tcp://${this.opts.endpointDomain}:${range ? randomInt(range.first, range.last + 1) : randomInt(10000, 60000)}`;
  }

  /** Tells the agent why it is being closed (it will not reconnect), then closes. */
  private async closeFor(conn: AgentConnection, e: ApiError) {
    await conn.control(CONTROL.closing, { error_code: e.code, msg: e.message }, 500).catch(() => {});
    conn.destroy();
  }

  /** Closes sessions whose credential was deleted or whose bot owner was deactivated. */
  private async revalidate() {
    if (!this.sessions.size && !this.attached.size) return;
    // Sessions by who they act for: a credential and its owner (an SSH CA's sessions act for the
    // principal of each certificate, so one CA can stand for several owners).
    const byCredential = new Map<string, string[]>();
    for (const [id, s] of [...this.sessions, ...this.attached]) {
      const key = `${s.credential.credentialId} ${s.credential.ownerId}`;
      byCredential.set(key, [...(byCredential.get(key) ?? []), id]);
    }
    const ids = [...new Set([...byCredential.keys()].map((k) => k.split(' ')[0]))];
    const rows = await this.ctx.db.prisma.resource.findMany({ where: { id: { in: ids } }, select: { id: true, data: true } });
    const present = new Map(rows.map((r) => [r.id, (r.data as { body: { owner_id?: string } }).body.owner_id]));
    for (const [key, sessionIds] of byCredential) {
      const [credentialId, sessionOwner] = key.split(' ');
      let problem: ApiError | undefined;
      // A credential names its owner; an SSH CA has none, and its sessions' owner is their certificate's principal.
      const owner = present.has(credentialId) ? present.get(credentialId) ?? sessionOwner : undefined;
      if (!owner) problem = new ApiError('ERR_SERVICE_202', `the credential ${credentialId} was deleted; create a new credential and restart the agent with its token`);
      else {
        try {
          await checkOwnerActive(this.ctx.db.prisma as never, owner);
        } catch (e) {
          problem = e as ApiError;
        }
      }
      if (!problem) continue;
      for (const id of sessionIds) {
        const s = this.sessions.get(id);
        const a = this.attached.get(id);
        if (!s && !a) continue;
        this.opts.log({ level: 'info', msg: `closing agent session: ${problem.message}`, session: id });
        if (s) void this.closeFor(s.conn, problem);
        else a!.close(problem);
      }
    }
  }

  /** An agent command from the API: 204 once the agent acknowledged it, wherever its connection is held. */
  async command(sessionId: string, action: Action): Promise<void> {
    const holder = await holderOf(this.ctx, sessionId);
    if (!holder) throw notFound('tunnel session', sessionId);
    if (holder === this.instanceId) return this.localCommand(sessionId, action);
    let reply: BusReply;
    try {
      reply = await this.bus.request(holder, sessionId, action, this.opts.commandTimeoutMs + 2000);
    } catch {
      throw new ApiError('ERR_SERVICE_504', `the server instance holding tunnel session ${sessionId} did not answer; retry`);
    }
    if (!reply.ok) {
      const code = (reply.error_code && reply.error_code in ERRORS ? reply.error_code : 'ERR_SERVICE_500') as ErrorCode;
      throw code === 'ERR_SERVICE_300' ? notFound('tunnel session', sessionId) : new ApiError(code, reply.msg ?? 'the command failed');
    }
  }

  private async localCommand(sessionId: string, action: Action): Promise<void> {
    const attached = this.attached.get(sessionId);
    if (attached) return attached.command(action);
    const live = this.sessions.get(sessionId);
    if (!live) throw notFound('tunnel session', sessionId);
    const bundle = action === 'update' ? await agentBundle(this.opts.version, (msg) => this.opts.log({ level: 'warn', msg })) : undefined;
    const offer = bundle ? { version: bundle.version, sha256: bundle.sha256, size: bundle.size } : undefined;
    let reply;
    try {
      reply = await live.conn.control(CONTROL.command, { action, offer }, this.opts.commandTimeoutMs);
    } catch (e) {
      if (e instanceof TimeoutError) throw new ApiError('ERR_SERVICE_504', `the agent of tunnel session ${sessionId} did not acknowledge ${action} within ${this.opts.commandTimeoutMs / 1000} s; it may be stuck or on a slow link: retry, or stop it on its host`);
      if (live.conn.isClosed) throw notFound('tunnel session', sessionId);
      throw new ApiError('ERR_SERVICE_504', `the agent of tunnel session ${sessionId} did not acknowledge ${action}: ${(e as Error).message}`);
    }
    if (reply.status !== 200) {
      const code = reply.body?.error_code;
      if (typeof code === 'string' && code in ERRORS && ERRORS[code as ErrorCode].status === 409) throw new ApiError(code as ErrorCode, String(reply.body.msg ?? ERRORS[code as ErrorCode].summary));
      throw new ApiError('ERR_SERVICE_504', `the agent of tunnel session ${sessionId} answered ${action} with status ${reply.status}`);
    }
    this.opts.log({ level: 'info', msg: `agent acknowledged ${action}`, session: sessionId });
    if (action === 'update' && bundle) {
      void live.conn.push(CONTROL.bundle, { 'content-type': 'application/javascript', 'edgeform-version': bundle.version, 'edgeform-sha256': bundle.sha256 }, bundle.code, 60_000)
        .catch((e) => this.opts.log({ level: 'warn', msg: `sending the agent bundle failed: ${(e as Error).message}`, session: sessionId }));
    }
  }

  private readonly isLocal = (tunnelId: string) => this.labeled.has(tunnelId);

  /** With --peer-choice prefer-local, which tunnels a tunnel-group backend takes first: this instance's. */
  preferred(): ((tunnelId: string) => boolean) | undefined {
    return this.opts.peerChoice === 'prefer-local' && this.peers?.labeled.size ? this.isLocal : undefined;
  }

  /** The online labeled tunnels of every instance with their labels (live; do not modify). */
  labeledTunnels(): ReadonlyMap<string, Readonly<Record<string, string>>> {
    const remote = this.peers?.labeled;
    if (!remote?.size) return this.labeled;
    return (this.merged ??= new Map([...remote, ...this.labeled]));
  }

  /**
   * Whether the tunnel's agent connection is still up. An agent killed a moment ago may still
   * be listed while its connection closes; the ingress then tries another matching tunnel.
   */
  tunnelLive(tunnelId: string): boolean {
    const session = this.tunnels.get(tunnelId);
    if (session === undefined) return this.peers?.tunnels.get(tunnelId)?.link.up ?? false;
    const conn = this.sessions.get(session)?.conn;
    if (!conn) return false;
    return !conn.isClosed && !conn.h2.destroyed && !conn.h2.closed && !conn.socket.destroyed;
  }

  /** A relayed HTTP request to a tunnel of this instance or of another holder (the ingress's entry point). */
  openStream(tunnelId: string, req: { method: string; path: string; headers?: Record<string, string | string[] | undefined>; endStream?: boolean }, client = ''): ClientHttp2Stream {
    return this.holderOf(tunnelId).openStream(tunnelId, req, client);
  }

  /** A raw TCP stream to a tunnel's upstream (TCP and TLS edges; WebSockets), wherever it is held. */
  openTcp(tunnelId: string, client = ''): ClientHttp2Stream {
    return this.holderOf(tunnelId).openTcp(tunnelId, client);
  }

  /** A tunnel held here, or by another holder (peers/): never a loop, since holders answer peers from their own tunnels only. */
  private holderOf(tunnelId: string): AgentConnection | AttachedSession | PeerLink {
    if (!this.tunnels.has(tunnelId)) {
      const remote = this.peers?.tunnels.get(tunnelId);
      if (remote) return remote.link;
    }
    return this.connOf(tunnelId);
  }

  // The holder's side of the peer channel (peers/protocol.ts's LocalHolder): this instance's own tunnels only.

  openLocalStream(tunnelId: string, req: PeerRequest & { endStream?: boolean }, client: string): ClientHttp2Stream {
    return this.connOf(tunnelId).openStream(tunnelId, req, client);
  }

  openLocalTcp(tunnelId: string, client: string): ClientHttp2Stream {
    return this.connOf(tunnelId).openTcp(tunnelId, client);
  }

  sharedTunnels(): SharedTunnel[] {
    const out: SharedTunnel[] = [];
    for (const id of this.tunnels.keys()) {
      const t: SharedTunnel = { id };
      const labels = this.labeled.get(id);
      if (labels) t.labels = labels;
      const host = this.hostOf.get(id);
      if (host !== undefined) t.host = host;
      const pool = this.poolOf.get(id);
      if (pool !== undefined) t.pool = pool;
      if (this.tlsEndpoints.has(id)) t.tls = true;
      const proto = this.endpointProtos.get(id);
      if (proto) t.proto = proto;
      const route = this.endpointRoutes.get(id);
      if (route) t.route = route;
      out.push(t);
    }
    return out;
  }

  onTunnelsChanged(fn: () => void): () => void {
    this.tunnelWatchers.add(fn);
    return () => this.tunnelWatchers.delete(fn);
  }

  private tunnelsChanged() {
    this.merged = undefined;
    for (const fn of this.tunnelWatchers) fn();
    for (const fn of this.reachableWatchers) fn();
  }

  /** Calls `fn` when the tunnels this gateway reaches change, its own or its peers'; returns the way to stop. */
  onReachableTunnelsChanged(fn: () => void): () => void {
    this.reachableWatchers.add(fn);
    return () => this.reachableWatchers.delete(fn);
  }

  /** Every tunnel this gateway reaches, its own and its peers', as the ingress looks them up. */
  reachableTunnels(): SharedTunnel[] {
    // A session of another transport (the SDK's, ssh -R) counts while it is attached.
    const attachedTunnel = (id: string) => this.attached.has(this.tunnels.get(id) ?? '');
    const out = this.sharedTunnels().filter((t) => this.tunnelLive(t.id) || attachedTunnel(t.id));
    for (const [id, r] of this.peers?.tunnels ?? []) if (!this.tunnels.has(id)) out.push({ ...r.t, id });
    return out;
  }

  /** The tunnels of the other instances (peers/peers.ts) join this gateway's choices; `changed` is theirs to call. */
  usePeers(peers: Peers) {
    this.peers = peers;
  }

  /** The other holders' tunnels changed (peers/peers.ts). */
  peersChanged() {
    this.merged = undefined;
    for (const fn of this.reachableWatchers) fn();
  }

  /**
   * Draining (SIGTERM): new agent connections are refused (503), and the agents held here are
   * told to reconnect, through the load balancer, to another instance: an edgeform agent's
   * connection gets GOAWAY (its streams in flight finish, then it reconnects), a version-2
   * session is ended without a reason (the SDK reconnects; no resume is kept for it here).
   * One agent at a time: the next is told once the labels of the one before are served by
   * another instance (or `withinMs` has passed), so two agents of one label held here do not
   * leave their label without a tunnel at once.
   */
  async drainAgents(withinMs: number) {
    this.draining = true;
    const deadline = Date.now() + withinMs;
    for (const s of [...this.sessions.values()]) {
      const labels = [...s.tunnels].map((t) => this.labeled.get(t)).filter((l): l is Readonly<Record<string, string>> => !!l);
      // Chosen no more, here or by the other instances (their watches hear of it now), while
      // the streams already open finish; the agent's new session elsewhere takes its place.
      for (const t of s.tunnels) this.dropTunnel(t);
      if (!s.conn.isClosed && !s.conn.h2.closed) s.conn.h2.close();
      while (Date.now() < deadline && labels.some((l) => !this.servedElsewhere(l))) await new Promise((r) => setTimeout(r, 25));
    }
    for (const a of this.attached.values()) a.close();
  }

  /** Draining alone (no other instance to take its agents): only new agent connections are refused. */
  refuseAgents() {
    this.draining = true;
  }

  /** Whether a tunnel with exactly these labels is held by another instance. */
  private servedElsewhere(labels: Readonly<Record<string, string>>): boolean {
    const want = JSON.stringify(Object.entries(labels).sort());
    for (const l of this.peers?.labeled.values() ?? []) if (JSON.stringify(Object.entries(l).sort()) === want) return true;
    return false;
  }

  /** Whether this instance refuses new agents (draining). */
  get isDraining() { return this.draining; }

  /**
   * An idle pooled connection to the tunnel's upstream with the path prefix of its forwards_to,
   * or undefined: the pool is off, the upstream is not plain HTTP, or none is idle (then the
   * request goes by openStream). Throws as openStream does when the tunnel is gone.
   */
  takePooled(tunnelId: string, client = ''): { conn: PooledConnection; prefix: string } | undefined {
    // A tunnel of another holder is relayed as a stream of its own (its holder's pool is its own).
    if (!this.tunnels.has(tunnelId) && this.peers?.tunnels.has(tunnelId)) return undefined;
    const conn = this.connOf(tunnelId);
    const size = this.opts.relayPool ?? DEFAULT_RELAY_POOL;
    if (!(conn instanceof AgentConnection)) return size > 0 ? conn.takePooled?.(tunnelId, size) : undefined;
    const prefix = this.plainHttp.get(tunnelId);
    if (size <= 0 || prefix === undefined) return undefined;
    const pooled = conn.takePooled(tunnelId, size, client);
    return pooled && { conn: pooled, prefix };
  }

  /**
   * For a pool held elsewhere (an ingress worker's, server/cluster/): the path prefix of the
   * tunnel's forwards_to when requests to it may go over pooled connections, each a TCP stream
   * through this gateway (openTcp); undefined when they may not (the pool is off, the upstream
   * is not plain HTTP, another instance or an attached session holds the tunnel).
   */
  pooledPrefix(tunnelId: string): string | undefined {
    if ((this.opts.relayPool ?? DEFAULT_RELAY_POOL) <= 0) return undefined;
    const session = this.tunnels.get(tunnelId);
    if (session === undefined || !this.sessions.has(session)) return undefined;
    return this.plainHttp.get(tunnelId);
  }

  private connOf(tunnelId: string): AgentConnection | AttachedSession {
    const session = this.tunnels.get(tunnelId);
    const live = session ? this.sessions.get(session)?.conn ?? this.attached.get(session) : undefined;
    if (!live) throw notFound('tunnel', tunnelId);
    return live;
  }

  /** A session of another transport (gateway/v2) joins this gateway's: leases, revalidation, commands. */
  attach(sessionId: string, s: AttachedSession) {
    this.attached.set(sessionId, s);
  }

  detach(sessionId: string) {
    this.attached.delete(sessionId);
  }

  /** A tunnel of an attached session, online here: labeled ones for tunnel-group backends, endpoints by hostname. */
  addTunnel(sessionId: string, tunnelId: string, t: { labels?: Record<string, string>; publicUrl?: string; proto?: string; route?: FullDoc; internal?: boolean; pooled?: boolean }) {
    this.tunnels.set(tunnelId, sessionId);
    if (t.route) this.endpointRoutes.set(tunnelId, t.route);
    if (t.labels) this.labeled.set(tunnelId, t.labels);
    if (t.publicUrl) this.addEndpoint(tunnelId, t.publicUrl, t.proto, t);
    this.tunnelsChanged();
  }

  private addEndpoint(tunnelId: string, publicUrl: string, proto?: string, how: { internal?: boolean; pooled?: boolean } = {}) {
    const host = proto === 'tcp' ? `tcp:${new URL(publicUrl).port}` : endpointKey(publicUrl);
    if (proto === 'tls') this.tlsEndpoints.add(tunnelId);
    if (proto) this.endpointProtos.set(tunnelId, proto);
    if (how.internal || how.pooled) {
      const key = how.internal ? internalKey(publicUrl) : host;
      let members = this.pools.get(key);
      if (!members) this.pools.set(key, (members = new Set()));
      members.add(tunnelId);
      this.poolOf.set(tunnelId, key);
      return;
    }
    this.endpointHosts.set(host, tunnelId);
    this.hostOf.set(tunnelId, host);
  }

  dropTunnel(tunnelId: string) {
    this.tunnels.delete(tunnelId);
    this.labeled.delete(tunnelId);
    this.plainHttp.delete(tunnelId);
    this.endpointRoutes.delete(tunnelId);
    this.tlsEndpoints.delete(tunnelId);
    this.endpointProtos.delete(tunnelId);
    const host = this.hostOf.get(tunnelId);
    if (host !== undefined && this.endpointHosts.get(host) === tunnelId) this.endpointHosts.delete(host);
    this.hostOf.delete(tunnelId);
    // A pool member leaves its pool at once: the next request goes to the others.
    const pool = this.poolOf.get(tunnelId);
    if (pool !== undefined) {
      const members = this.pools.get(pool);
      members?.delete(tunnelId);
      if (!members?.size) {
        this.pools.delete(pool);
        this.turns.forget(pool);
      }
      this.poolOf.delete(tunnelId);
    }
    this.tunnelsChanged();
  }

  /**
   * The online tunnel whose public endpoint has this hostname (lower case; `tcp:PORT` for TCP),
   * here or at a peer, if any; for a pool, its first member (which is enough to know what the
   * name is). The tunnel that takes a request or connection is pickEndpointTunnel's.
   */
  endpointTunnel(hostname: string): string | undefined {
    return this.endpointHosts.get(hostname) ?? this.peers?.hosts.get(hostname) ?? this.poolMembers(hostname)[0];
  }

  /** The tunnel that takes the next request or connection for this hostname: a pool's members in turn. */
  pickEndpointTunnel(hostname: string): string | undefined {
    return this.endpointHosts.get(hostname) ?? this.peers?.hosts.get(hostname) ?? this.nextMember(hostname);
  }

  /**
   * The tunnel that takes the next request or connection for the internal endpoint (or pool)
   * at `url` (canonical, as parseEndpointUrl writes it), through forward-internal; undefined
   * when no agent's endpoint is there.
   */
  pickInternalTunnel(url: string): string | undefined {
    return this.nextMember(`internal:${url}`);
  }

  /** Whether an agent's internal endpoint is online at `url` (here or at a peer), without taking a turn. */
  hasInternalTunnel(url: string): boolean {
    return this.poolMembers(`internal:${url}`).length > 0;
  }

  /** A pool's members: this instance's, then the other instances' (peers/peers.ts). */
  private poolMembers(key: string): string[] {
    const here = this.pools.get(key);
    const there = this.peers?.pools.get(key);
    if (!there?.length) return here ? [...here] : [];
    return [...(here ?? []), ...there.filter((id) => !here?.has(id))];
  }

  private nextMember(key: string): string | undefined {
    return this.turns.pick(key, this.poolMembers(key));
  }

  /** Whether the endpoint's tunnel is a tls one (its connections pass through, still encrypted). */
  isTlsEndpoint(tunnelId: string): boolean {
    return this.tlsEndpoints.has(tunnelId) || !!this.peers?.tunnels.get(tunnelId)?.t.tls;
  }

  /** The proto of an endpoint's tunnel online here (http, https, tls, tcp), if known. */
  endpointProto(tunnelId: string): string | undefined {
    return this.endpointProtos.get(tunnelId) ?? this.peers?.tunnels.get(tunnelId)?.t.proto;
  }

  /** The route document of the modules an endpoint runs, if its agent asked for any. */
  endpointRoute(tunnelId: string): FullDoc | undefined {
    return this.endpointRoutes.get(tunnelId) ?? this.peers?.tunnels.get(tunnelId)?.t.route;
  }

  /** The online tunnel of this instance whose TCP endpoint has this public port, if any. */
  tcpEndpointTunnel(port: number): string | undefined {
    const key = `tcp:${port}`;
    return this.endpointHosts.get(key) ?? this.peers?.hosts.get(key) ?? this.nextMember(key);
  }

  /** Whether any endpoint is online here (the ingress then reads a ClientHello on a port without edges). */
  get hasEndpoints() { return this.endpointHosts.size > 0 || (this.peers?.hosts.size ?? 0) > 0 || this.pools.size > 0 || (this.peers?.pools.size ?? 0) > 0; }
}

/** The pool key of an internal endpoint: its URL as forward-internal names it (scheme, name, a TCP port). */
function internalKey(publicUrl: string): string {
  const u = parseEndpointUrl(publicUrl);
  return `internal:${typeof u === 'string' ? publicUrl : u.url}`;
}

/**
 * The tunnels left out by createSession because their hostname is held elsewhere become
 * refusals in what the agent is told (409 ERR_SERVICE_320); TCP endpoints may have drawn
 * another port. Returns the rows that were written.
 */
function settleTaken(sessionId: string, rows: TunnelRow[], results: BoundTunnel[], taken: TakenEndpoint[]): TunnelRow[] {
  const refused = new Map(taken.map((t) => [t.tunnelId, t]));
  for (const [i, r] of results.entries()) {
    const row = rows.find((x) => x.id === r.id);
    if (!row) continue;
    const t = refused.get(row.id);
    if (!t) {
      if (row.endpoint) r.public_url = row.endpoint.publicUrl;
      continue;
    }
    const by = t.holderSession === sessionId ? `this session's tunnel ${t.holderTunnel}` : `tunnel ${t.holderTunnel ?? '(unknown)'} of tunnel session ${t.holderSession ?? '(unknown)'}`;
    results[i] = {
      name: r.name,
      error: {
        error_code: 'ERR_SERVICE_320',
        msg: `tunnel "${r.name}": the hostname ${t.key} is already served by ${by}; one tunnel session at a time holds a hostname unless every endpoint there enables pooling (--pooling-enabled), and it is free again once that session ends (stop that agent, or ask for another hostname)`,
      },
    };
  }
  return rows.filter((r) => !refused.has(r.id));
}

/** The path prefix of a forwards_to that is plain HTTP; undefined for another scheme (or one that does not parse). */
function plainPrefix(forwardsTo: string): string | undefined {
  try {
    const up = httpUpstreamOf(forwardsTo);
    return up.plain ? up.prefix : undefined;
  } catch {
    return undefined;
  }
}

/** The refusal of a session past its credential's limit, with what to do about it. */
const sessionLimit = (credentialId: string, held: number, limit: number) => new ApiError('ERR_SERVICE_840',
  `the credential ${credentialId} already holds ${held} agent session${held === 1 ? '' : 's'}, and the server allows at most ${limit} per credential (edgeform serve --agent-max-sessions-per-credential); ` +
  'stop one of its agents (GET /tunnel_sessions lists the sessions, POST /tunnel_sessions/{id}/stop stops one), or start this agent with another credential (POST /credentials)',
  { limit });

const labelText = (labels: Record<string, string>) => Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(',');

const toReply = (e: unknown): BusReply => ({ ok: false, error_code: (e as ApiError).code ?? 'ERR_SERVICE_500', msg: (e as Error).message });

/** An API error on a raw socket (before the upgrade), in the API's JSON error shape. */
function writeHttpError(socket: Socket, e: ApiError) {
  const operationId = `op_${newIdBody()}`;
  const body = JSON.stringify({ error_code: e.code, status_code: e.status, msg: e.message, details: { ...e.details, operation_id: operationId } });
  const extra = (e.status === 401 ? 'WWW-Authenticate: Bearer\r\n' : '') + Object.entries(e.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.end(`HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nService-Operation-Id: ${operationId}\r\n${extra}Connection: close\r\n\r\n${body}`);
}
