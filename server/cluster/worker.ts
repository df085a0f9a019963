// An ingress worker of `edgeform serve --workers N` (primary.ts): serves the ingress listeners
// (their sockets shared by node:cluster) with a routing table of its own, read from the
// database at start and kept in step by the ids the primary sends after each committed write;
// tunnels through the primary (relay-channel.ts), rate-limit buckets at the primary
// (shared-windows.ts). It writes nothing to the database. It leaves on the primary's word
// (`drain`), or when the primary is gone; SIGINT and SIGTERM are the primary's to act on.
import type { ClientHttp2Stream } from 'node:http2';
import type { ServerConfig } from '../config.js';
import type { Gateway } from '../gateway/gateway.js';
import { DEFAULT_RELAY_POOL, RelayPool, type PooledConnection } from '../gateway/relay-pool.js';
import { isIngressMetric, Metrics } from '../http/metrics.js';
import { DEFAULT_CONNECTIONS_PER_CLIENT, LISTENER_LIMITS } from '../ingress/listen.js';
import { DEFAULT_BUFFER_MIB, DEFAULT_UNREAD_MIB } from '../ingress/buffer-budget.js';
import { DEFAULT_RELAYS_PER_CLIENT } from '../ingress/client-relays.js';
import { startIngress } from '../ingress/start.js';
import type { FullDoc } from '../ingress/types.js';
import { Turns } from '../ingress/backends/tunnel-group.js';
import { FLUSH_MS, logLine } from '../log-lines.js';
import type { ServerContext } from '../resources/context.js';
import { openDatabase } from '../store/db.js';
import { configuredKey } from '../store/secret-key.js';
import type { ToPrimary, ToWorker, TunnelSnapshot } from './messages.js';
import { HolderClient, type RelayRequest } from './relay-channel.js';
import { PrimaryAsker, RemoteBreaker, RemoteWindows } from './shared-windows.js';

/** What the ingress asks of the gateway, answered from the primary's tunnels (a snapshot it keeps current). */
class RemoteGateway {
  /** Counted by the ingress (backends/relay.ts), as in the gateway. */
  readonly relayed = { pooled: 0, stream: 0 };
  private live = new Set<string>();
  private labeled = new Map<string, Readonly<Record<string, string>>>();
  private endpoints = new Map<string, string>();
  private tls = new Set<string>();
  private routes = new Map<string, FullDoc>();
  private protos = new Map<string, string>();
  /** Endpoint pools and internal endpoints (issue 36), by key, and each one's next turn (per worker). */
  private endpointPools = new Map<string, string[]>();
  private turns = new Turns();
  /** The path prefix of each tunnel whose requests go over pooled connections. */
  private prefixes = new Map<string, string>();
  /** This worker's pooled connections, per tunnel: TCP streams through the primary to the upstream. */
  private pools = new Map<string, RelayPool>();
  /** @param poolSize pooled connections per tunnel in this worker (its share of --agent-relay-pool). */
  constructor(private readonly holder: HolderClient, private readonly poolSize: number) {}

  update(s: TunnelSnapshot) {
    this.live = new Set(s.live);
    this.labeled = new Map(s.labeled);
    this.endpoints = new Map(s.endpoints);
    this.tls = new Set(s.tls);
    this.routes = new Map(s.routes);
    this.protos = new Map(s.protos);
    this.endpointPools = new Map(s.pools ?? []);
    const prefixes = new Map(s.pooled);
    // A pool whose tunnel went (or now has another prefix) goes with it.
    for (const [id, pool] of this.pools) {
      if (prefixes.get(id) === this.prefixes.get(id)) continue;
      pool.closeAll();
      this.pools.delete(id);
    }
    this.prefixes = prefixes;
  }

  closePools() {
    for (const pool of this.pools.values()) pool.closeAll();
    this.pools.clear();
  }

  labeledTunnels() { return this.labeled; }
  tunnelLive(id: string) { return this.live.has(id); }
  openStream(id: string, req: RelayRequest, client = ''): ClientHttp2Stream {
    return this.holder.openStream(id, req, client);
  }
  openTcp(id: string, client = ''): ClientHttp2Stream { return this.holder.openTcp(id, client); }
  endpointTunnel(host: string) { return this.endpoints.get(host) ?? this.endpointPools.get(host)?.[0]; }
  pickEndpointTunnel(host: string) { return this.endpoints.get(host) ?? this.next(host); }
  pickInternalTunnel(url: string) { return this.next(`internal:${url}`); }
  hasInternalTunnel(url: string) { return !!this.endpointPools.get(`internal:${url}`)?.length; }
  private next(key: string): string | undefined {
    return this.turns.pick(key, this.endpointPools.get(key) ?? []);
  }
  /**
   * An idle pooled connection of this worker to the tunnel's upstream, as the primary's gateway
   * gives its own (gateway.takePooled): HTTP/1.1 spoken here, over a TCP stream the primary
   * only passes on; undefined when none is idle (the request goes as a stream of its own).
   */
  takePooled(id: string): { conn: PooledConnection; prefix: string } | undefined {
    const prefix = this.prefixes.get(id);
    if (prefix === undefined || this.poolSize <= 0) return undefined;
    let pool = this.pools.get(id);
    if (!pool) this.pools.set(id, (pool = new RelayPool(this.poolSize, () => this.holder.openUpstream(id))));
    const conn = pool.take();
    return conn && { conn, prefix };
  }
  isTlsEndpoint(id: string) { return this.tls.has(id); }
  endpointRoute(id: string) { return this.routes.get(id); }
  endpointProto(id: string) { return this.protos.get(id); }
  tcpEndpointTunnel(port: number) { return this.endpoints.get(`tcp:${port}`) ?? this.next(`tcp:${port}`); }
  get hasEndpoints() { return this.endpoints.size > 0 || this.pools.size > 0; }
}

/** This worker's share of a per-client bound (rounded up; 0 stays "no limit"). */
const share = (limit: number, workers: number) => (limit === 0 ? 0 : Math.max(1, Math.ceil(limit / workers)));

export async function runIngressWorker(config: ServerConfig): Promise<void> {
  const send = (m: ToPrimary) => process.send?.(m);
  const workers = Number(process.env.EDGEFORM_WORKER_COUNT) || 1;
  const pid = process.pid;
  // Log lines go to the primary, which writes them: one writer of the server's output, so a
  // line is never cut by another process's (a pipe keeps only writes of 4 KiB whole), batched
  // as log-lines.ts batches them. Each names the worker: `"worker":<pid>` after the brace.
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (!pending) return Promise.resolve();
    const text = pending;
    pending = '';
    return new Promise<void>((resolve) => {
      if (!process.send?.({ t: 'log', text } satisfies ToPrimary, undefined, {}, () => resolve())) resolve();
    });
  };
  const write = (line: string) => {
    pending += `${line.startsWith('{') ? `{"worker":${pid},${line.slice(1)}` : line}\n`;
    if (pending.length > 64 * 1024) void flush();
    else timer ??= setTimeout(flush, FLUSH_MS).unref();
  };
  const logFields = (fields: Record<string, unknown>) => write(logLine(fields));
  // The primary coordinates stopping (a terminal's Ctrl-C reaches every process of the group).
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
  try {
    const db = await openDatabase(config.databaseUrl, { pg: { ...config.databasePool, poolSize: Math.min(2, config.databasePool?.poolSize ?? 2) }, startTimeoutMs: config.databaseStartTimeoutMs, log: logFields });
    // The primary settled the key (a rotation included) before it started the workers.
    const { box } = configuredKey({ ...config, secretKeyPrevious: undefined, secretKeyPreviousFile: undefined });
    if (!box) throw new Error('no secret key: the primary should have made one');
    const ctx: ServerContext = { db, box, publicUrl: config.publicUrl ?? '' };
    const holder = new HolderClient(process.env.EDGEFORM_WORKER_HOLDER!);
    // Each worker holds its share of --agent-relay-pool: the agent keeps as many upstream connections as with one process.
    const gateway = new RemoteGateway(holder, share(config.agentRelayPool ?? DEFAULT_RELAY_POOL, workers));
    const metrics = new Metrics();
    const ingress = await startIngress({
      listeners: [...(config.ingress ?? []), ...(config.ingressHttp ?? [])],
      ctx,
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir ?? 'data',
      gateway: gateway as unknown as Gateway,
      metrics,
      log: logFields,
      writeLine: write,
      relaysPerClient: share(config.ingressRelaysPerClient ?? DEFAULT_RELAYS_PER_CLIENT, workers),
      agentTcpPorts: config.agentTcpPorts,
      upstreamIdleMs: config.ingressUpstreamIdleTimeoutMs,
      // The server-wide bounds are the server's, not each worker's: each holds its share.
      bufferMib: share(config.ingressBufferMib ?? DEFAULT_BUFFER_MIB, workers),
      unreadMib: share(config.ingressUnreadMib ?? DEFAULT_UNREAD_MIB, workers),
      limits: {
        maxConnections: share(config.ingressMaxConnections || LISTENER_LIMITS.maxConnections, workers),
        connectionsPerClient: share(config.ingressConnectionsPerClient ?? DEFAULT_CONNECTIONS_PER_CLIENT, workers),
        ...(config.ingressBodyIdleTimeoutMs !== undefined ? { bodyIdleTimeoutMs: config.ingressBodyIdleTimeoutMs } : {}),
        ...config.ingressLimits,
      },
    });
    // Every worker counts against the primary's buckets and trips the primary's circuit breakers.
    const asker = new PrimaryAsker(process.env.EDGEFORM_WORKER_WINDOWS!);
    (ingress.deps.policyState as { windows: unknown }).windows = new RemoteWindows(asker);
    ingress.deps.makeBreaker = (key, cfg) => new RemoteBreaker(asker, key, cfg);
    let draining = false;
    const drain = async (deadlineMs: number) => {
      if (draining) return;
      draining = true;
      await ingress.drain(deadlineMs);
      gateway.closePools();
      holder.close();
      await db.close();
      await flush();
      process.exit(0);
    };
    process.on('message', (m: ToWorker) => {
      if (m.t === 'tunnels') gateway.update(m.snap);
      else if (m.t === 'changed') {
        ingress.changed(m.ids).then(() => send({ t: 'applied', seq: m.seq }), (e) => {
          logFields({ level: 'error', msg: `ingress worker: applying a change failed: ${(e as Error).message}` });
          send({ t: 'applied', seq: m.seq });
        });
      } else if (m.t === 'drain') void drain(m.deadlineMs);
      else if (m.t === 'metrics') {
        // This worker's ingress counters, for the primary's GET /metrics to add up (the rest are the primary's).
        metrics.registry.getMetricsAsJSON().then((all) => all.filter(isIngressMetric), () => []).then((list) => send({ t: 'metrics', id: m.id, metrics: list }));
      }
    });
    // The primary is gone (it crashed, or was killed): nothing keeps this worker's table current.
    process.on('disconnect', () => void drain(0));
    send({ t: 'ready', listeners: ingress.listeners.map((l) => l.address), agentTcpPorts: ingress.agentTcpPorts });
  } catch (e) {
    // What a listener's failure says (code, address, port) goes along, for serve's one-line reason (bin/serve-errors.ts).
    const err = e as NodeJS.ErrnoException & { address?: string; port?: number };
    await flush();
    send({ t: 'failed', message: err.message, code: err.code, syscall: err.syscall, address: err.address, port: err.port });
    process.exit(1);
  }
}
