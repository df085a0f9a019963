// Starts the API server: database (migrated), bootstrap, routes, listener.
import type { FastifyInstance } from 'fastify';
import { packageVersion } from './package-root.js';
import { bootstrap, type Bootstrap } from './bootstrap.js';
import { DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL, type ServerConfig } from './config.js';
import { DeliveryWorker } from './events/delivery.js';
import { endpointUrlMaker, Gateway } from './gateway/gateway.js';
import { buildApp } from './http/app.js';
import { authFailureCounter } from './http/rate-limit.js';
import { Metrics } from './http/metrics.js';
import { startIngress, type RunningIngress } from './ingress/start.js';
import type { LiveTable } from './ingress/live-table.js';
import { startWorkers } from './cluster/primary.js';
import { V2Gateway } from './gateway/v2/listener.js';
import { peerCredentials } from './gateway/peers/credentials.js';
import { Peers } from './gateway/peers/peers.js';
import { PeerServer } from './gateway/peers/server.js';
import { SshGateway } from './gateway/ssh/listener.js';
import { drainable, DRAIN_DEFAULTS } from './http/drain.js';
import { openapiDocument } from './openapi.js';
import './resources/register.js';
import { lookUpKey } from './resources/accounts.js';
import { CallerCache } from './resources/caller-cache.js';
import type { ServerContext } from './resources/context.js';
import { apiRoutes } from './resources/routes.js';
import { openDatabase, type Database } from './store/db.js';
import { configuredKey, secretBoxFor } from './store/secret-key.js';
import { lockSqliteDatabase } from './store/sqlite-lock.js';
import { DiskFullState } from './http/disk-full.js';
import { EventPruner } from './events/retention.js';
import { flushLogLines, logLine, writeLogLine } from './log-lines.js';

const version = packageVersion;

export interface RunningServer {
  app: FastifyInstance;
  db: Database;
  /** The public base URL. */
  url: string;
  /** The address actually listened on. */
  listening: string;
  bootstrap: Bootstrap;
  /** Agent connections: sessions, commands, and the relay entry points (openStream, openTcp). */
  gateway: Gateway;
  /** The version-2 agent listener (`--agent-listen`), when asked for. */
  agentListener?: V2Gateway;
  /** The `ssh -R` listener (`--ssh-listen`), when asked for. */
  sshListener?: SshGateway;
  /** The ingress (`--ingress`): its listeners, routing table and local CA; absent without listeners. */
  ingress?: RunningIngress;
  metrics: Metrics;
  /** The listener for the other instances (`--peer-listen`), when asked for. */
  peerServer?: PeerServer;
  /** The other instances' tunnels (PostgreSQL only: on SQLite there is one instance). */
  peers?: Peers;
  /**
   * SIGTERM's first step (docs/agents.md, "Several instances"): /healthz answers 503, new agents
   * are refused and held ones told to reconnect elsewhere; then, after `graceMs` (while the load
   * balancer notices), close() finishes what is in flight.
   */
  drainAndClose(graceMs: number): Promise<void>;
  close(): Promise<void>;
}

export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const log = config.log ?? writeLogLine;
  const logFields = (fields: Record<string, unknown>) => log(logLine(fields));
  // A malformed key is refused before the database is touched.
  configuredKey(config);
  // One server per SQLite database (sqlite-lock.ts): refused before the database is migrated or written.
  const sqliteLock = lockSqliteDatabase(config.databaseUrl);
  let db: Database;
  try {
    db = await openDatabase(config.databaseUrl, { pg: config.databasePool, startTimeoutMs: config.databaseStartTimeoutMs, log: logFields });
  } catch (e) {
    sqliteLock?.release();
    throw e;
  }
  try {
    const box = await secretBoxFor(db, config, (msg) => logFields({ msg }));
    const boot = await bootstrap(db, { token: config.bootstrapToken, tokenFile: config.bootstrapTokenFile });
    const routes = apiRoutes();
    const server: ServerContext = { db, box, callers: new CallerCache((digest) => lookUpKey(db.hot, digest)), publicUrl: config.publicUrl ?? '', stackLockLeaseSeconds: config.stackLockLeaseSeconds, fingerprintRateLimit: config.fingerprintRateLimit };
    let openapi: unknown;
    const metrics = new Metrics();
    const diskFull = new DiskFullState();
    let closing = false;
    let draining = false;
    // One count of failed authentications per address for the API and the agent endpoint: a guesser gains nothing by switching.
    const authFailures = authFailureCounter(config.authFailureLimit, config.apiRateWindowMs);
    const app = buildApp({
      isClosing: () => closing,
      isDraining: () => draining,
      server,
      routes,
      apiRateLimit: config.apiRateLimit,
      apiRateWindowMs: config.apiRateWindowMs,
      authFailures,
      log,
      openapi: () => (openapi ??= openapiDocument(routes, server.publicUrl, version)),
      metrics,
      diskFull,
    });
    const drain = drainable(app.server, { ...DRAIN_DEFAULTS, ...config.drain });
    const gateway = new Gateway(server, {
      heartbeatMs: config.agentHeartbeatMs,
      maxSessionsPerCredential: config.agentMaxSessionsPerCredential ?? DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL,
      relayPool: config.agentRelayPool,
      resetPace: config.agentResetPace,
      region: config.region,
      endpointDomain: config.endpointDomain,
      tcpPorts: config.agentTcpPorts,
      endpointUrl: endpointUrlMaker((config.ingress ?? []).map((l) => l.publicPort), (config.ingressHttp ?? []).map((l) => l.publicPort)),
      commandTimeoutMs: config.agentCommandTimeoutMs ?? 5000,
      helloTimeoutMs: config.agentHelloTimeoutMs ?? 10_000,
      peerChoice: config.peerChoice,
      version,
      databaseUrl: config.databaseUrl,
      log: logFields,
      authFailures,
    });
    await gateway.start(app.server);
    server.gateway = gateway;
    metrics.busOf = () => gateway.busState;
    // Several instances share one PostgreSQL database: each reaches the tunnels the others hold.
    let peerServer: PeerServer | undefined;
    let peers: Peers | undefined;
    if (db.provider === 'postgresql' || config.peerListen) {
      const creds = peerCredentials(box, gateway.instanceId);
      const timeoutMs = config.peerTimeoutMs ?? 5000;
      let peerUrl = config.peerUrl;
      if (config.peerListen) {
        peerServer = new PeerServer(gateway, creds, { host: config.peerListen.host, port: config.peerListen.port, handshakeTimeoutMs: timeoutMs, log: logFields });
        try {
          await peerServer.start();
        } catch (e) {
          await gateway.stop();
          throw e;
        }
        peerUrl ??= `https://${config.peerListen.host.includes(':') ? `[${config.peerListen.host}]` : config.peerListen.host}:${peerServer.port}`;
      }
      peers = new Peers(server, creds, { instanceId: gateway.instanceId, url: peerServer ? peerUrl : undefined, tickMs: Math.max(20, Math.floor(config.agentHeartbeatMs / 5)), timeoutMs, log: logFields }, () => gateway.peersChanged());
      gateway.usePeers(peers);
      await peers.start();
      const [p, ps] = [peers, peerServer];
      metrics.peersOf = () => ({ ...p.stats(), served: ps?.served ?? 0, active: ps?.active ?? 0 });
    }
    metrics.databaseCheck = () => db.check().then(() => true, () => false);
    await app.listen({ host: config.host, port: config.port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host.includes(':') ? `[${config.host}]` : config.host;
    const listening = `http://${host}:${port}`;
    server.publicUrl = config.publicUrl ?? listening;
    const worker = new DeliveryWorker(server, log, `edgeform/${version}`, config.delivery);
    let ingress: RunningIngress | undefined;
    // The ingress's table while its start reads it (the API already answers): a write then is applied before the table serves.
    let startingTable: LiveTable | undefined;
    // Every committed write that queued deliveries wakes the event worker; with an ingress, the rows it wrote are applied to its table.
    server.afterCommit = (change) => {
      diskFull.committed();
      if (change?.deliveries !== false) worker.kick();
      return ingress ? ingress.changed(change?.ids) : startingTable?.changed(change?.ids);
    };
    worker.start();
    if (config.ingress?.length || config.ingressHttp?.length) {
      try {
        // `edgeform serve --workers N`: this process keeps the table, CA and buckets; N workers serve the listeners (server/cluster/).
        const forked = !!config.forkWorkers && (config.workers ?? 1) > 1;
        ingress = await startIngress({
          listeners: forked ? [] : [...(config.ingress ?? []), ...(config.ingressHttp ?? [])],
          ctx: server,
          databaseUrl: config.databaseUrl,
          tableTaken: (table) => { startingTable = table; },
          dataDir: config.dataDir ?? 'data',
          gateway,
          metrics,
          log: logFields,
          writeLine: log,
          relaysPerClient: config.ingressRelaysPerClient,
          agentTcpPorts: forked ? undefined : config.agentTcpPorts,
          upstreamIdleMs: config.ingressUpstreamIdleTimeoutMs,
          bufferMib: config.ingressBufferMib,
          unreadMib: config.ingressUnreadMib,
          limits: {
            ...(config.ingressMaxConnections ? { maxConnections: config.ingressMaxConnections } : {}),
            ...(config.ingressConnectionsPerClient !== undefined ? { connectionsPerClient: config.ingressConnectionsPerClient } : {}),
            ...(config.ingressBodyIdleTimeoutMs !== undefined ? { bodyIdleTimeoutMs: config.ingressBodyIdleTimeoutMs } : {}),
            ...config.ingressLimits,
          },
          acme: config.acme,
        });
        if (forked) {
          const local = ingress;
          ingress = await startWorkers(local, { workers: config.workers!, listeners: [...(config.ingress ?? []), ...(config.ingressHttp ?? [])], gateway, metrics, log: logFields }).catch(async (e) => {
            await local.drain(0);
            throw e;
          });
        }
      } catch (e) {
        await gateway.stop();
        await app.close();
        await worker.stop();
        throw e;
      }
    }
    // Delivered events older than the retention, pruned on a timer, off the request path.
    const pruner = new EventPruner(db, config.eventRetentionMs ?? 0, logFields);
    pruner.start();
    let agentListener: V2Gateway | undefined;
    if (config.agentListen) {
      agentListener = new V2Gateway(server, gateway, {
        host: config.agentListen.host, port: config.agentListen.port, hostnames: config.agentHostnames, dataDir: config.dataDir ?? 'data',
        region: config.region, endpointDomain: config.endpointDomain, tcpPorts: config.agentTcpPorts, version, heartbeatMs: config.agentHeartbeatMs,
        maxSessionsPerCredential: config.agentMaxSessionsPerCredential ?? DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL,
        commandTimeoutMs: config.agentCommandTimeoutMs ?? 5000, authTimeoutMs: config.agentHelloTimeoutMs ?? 10_000, authFailures,
      }, logFields);
      try {
        await agentListener.start();
      } catch (e) {
        await ingress?.drain(0);
        await gateway.stop();
        await app.close();
        await worker.stop();
        throw e;
      }
    }
    let sshListener: SshGateway | undefined;
    if (config.sshListen) {
      sshListener = new SshGateway(server, gateway, {
        host: config.sshListen.host, port: config.sshListen.port, region: config.region, endpointDomain: config.endpointDomain, tcpPorts: config.agentTcpPorts,
        heartbeatMs: config.agentHeartbeatMs, maxSessionsPerCredential: config.agentMaxSessionsPerCredential ?? DEFAULT_AGENT_SESSIONS_PER_CREDENTIAL, authFailures,
      }, logFields);
      try {
        await sshListener.start();
      } catch (e) {
        await agentListener?.stop();
        await ingress?.drain(0);
        await gateway.stop();
        await app.close();
        await worker.stop();
        throw e;
      }
    }
    const running: RunningServer = {
      app,
      db,
      agentListener,
      sshListener,
      url: server.publicUrl,
      listening,
      bootstrap: boot,
      gateway,
      ingress,
      metrics,
      peerServer,
      peers,
      async drainAndClose(graceMs: number) {
        draining = true;
        const until = Date.now() + graceMs;
        // Agents move only where another instance can take them; alone, this one keeps them
        // until its ingress has drained (close()), as before.
        if (peers && peers.connected > 0) await gateway.drainAgents(graceMs);
        else gateway.refuseAgents();
        const left = until - Date.now();
        if (left > 0) await new Promise((r) => setTimeout(r, left));
        await running.close();
      },
      async close() {
        closing = true;
        draining = true;
        flushLogLines();
        // Both listeners stop accepting at once (each drain's first step). The ingress's
        // requests and streams in flight ride on agents' connections, so they finish before
        // agents are told the server is closing (they reconnect elsewhere).
        const drained = drain();
        // Event sends in flight finish meanwhile (within their deadline) and are recorded, so they are not sent again after the restart.
        const delivered = worker.stop();
        await ingress?.drain({ ...DRAIN_DEFAULTS, ...config.drain }.deadlineMs);
        await agentListener?.stop();
        await sshListener?.stop();
        // Streams other instances relay through this one's agents finish before the agents go.
        await peers?.withdraw();
        await peerServer?.stop({ ...DRAIN_DEFAULTS, ...config.drain }.deadlineMs);
        await peers?.stop();
        await gateway.stop();
        await drained;
        await app.close();
        await delivered;
        await pruner.stop();
        await db.close();
        sqliteLock?.release();
        flushLogLines();
      },
    };
    return running;
  } catch (e) {
    await db.close();
    sqliteLock?.release();
    throw e;
  }
}
