// Starts the ingress beside the API: the local CA, the live routing table and one listener
// per `--ingress` spec. RunningServer.ingress is what this returns.
import type { Gateway } from '../gateway/gateway.js';
import type { Metrics } from '../http/metrics.js';
import { PolicyState } from '../policy/index.js';
import type { ServerContext } from '../resources/context.js';
import { startAgentTcp, type AgentTcpListeners } from './agent-tcp.js';
import { openLocalCa } from './ca.js';
import { DEFAULT_UPSTREAM_TIMEOUT_MS } from './backends/relay.js';
import { BufferBudget, DEFAULT_BUFFER_MIB, DEFAULT_UNREAD_MIB, UnreadAnswers } from './buffer-budget.js';
import { ClientRelays, DEFAULT_RELAYS_PER_CLIENT } from './client-relays.js';
import { DEFAULT_UPSTREAM_IDLE_MS } from './http/exchange.js';

const MiB = 1024 * 1024;
import { IngressListener, LISTENER_LIMITS, type ListenerLimits } from './listen.js';
import { LiveTable } from './live-table.js';
import { TlsContexts } from './tls.js';
import { AcmeIntercept } from './acme/intercept.js';
import type { AcmeSettings } from './acme/settings.js';
import type { IngressDeps, IngressListenerSpec } from './types.js';
import { servePolicyLookups } from './cloud-endpoints.js';

export interface IngressOptions {
  listeners: IngressListenerSpec[];
  ctx: ServerContext;
  databaseUrl: string;
  /** Given the table before its first read: writes committed during the read go to it (LiveTable.start). */
  tableTaken?: (table: LiveTable) => void;
  dataDir: string;
  gateway: Gateway;
  metrics: Metrics;
  log: (fields: Record<string, unknown>) => void;
  /** The log's line writer (the access log's lines are made whole, http/access-log.ts). */
  writeLine?: (line: string) => void;
  limits?: Partial<ListenerLimits>;
  /** Public ports of agents' TCP endpoints (--agent-tcp-ports), listened on at the first listener's address. */
  agentTcpPorts?: { first: number; last: number };
  /** Relays through agents one client address may have at once (0: no limit). */
  relaysPerClient?: number;
  /** `--ingress-upstream-idle-timeout` in ms (default 60 s; 0: never for bodies and upgrades). */
  upstreamIdleMs?: number;
  /** `--ingress-buffer-mib` (default 256; 0: no server-wide bound). */
  bufferMib?: number;
  /** `--ingress-unread-mib` (default 256; 0: no server-wide bound). */
  unreadMib?: number;
  /** Certificates from an ACME directory (--acme-directory); none: the local CA for every name. */
  acme?: AcmeSettings;
}

export interface RunningIngress {
  /** Each listener as asked for, with the port actually bound (0 asks for a free one). */
  listeners: (IngressListenerSpec & { address: string })[];
  /** The ports of agents' TCP endpoints listened on (--agent-tcp-ports). */
  agentTcpPorts: number[];
  /** The pids of the processes serving the listeners (`--workers` above 1, server/cluster/); absent: this process. */
  workers?: number[];
  /** The local CA's certificate (`<data>/ingress-ca.pem`), for clients to trust. */
  caFile: string;
  table: LiveTable;
  deps: IngressDeps;
  /** A write committed on this instance, with the ids it wrote when known (ServerContext.afterCommit chains it); settles once applied. */
  changed(ids?: readonly string[]): Promise<void>;
  /** Stops accepting and lets what is in flight finish, up to `deadlineMs`. */
  drain(deadlineMs: number): Promise<void>;
}

export async function startIngress(o: IngressOptions): Promise<RunningIngress> {
  const ca = await openLocalCa(o.dataDir, o.ctx);
  const table = await LiveTable.start(o.ctx, o.databaseUrl, o.log, o.tableTaken);
  o.metrics.tableVersionOf = () => table.now.version;
  o.metrics.relayedOf = () => o.gateway.relayed;
  const log = (f: Record<string, unknown>) => o.log(f.level ? f : { level: 'info', ...f });
  const idle = o.upstreamIdleMs ?? DEFAULT_UPSTREAM_IDLE_MS;
  const deps: IngressDeps = {
    gateway: o.gateway, policyState: new PolicyState(), log, writeLine: o.writeLine, now: Date.now, relays: new ClientRelays(o.relaysPerClient ?? DEFAULT_RELAYS_PER_CLIENT), box: o.ctx.box, publicUrl: o.ctx.publicUrl,
    // One upstream idle timeout: for the answer's head, its body and an upgrade's answer (0 leaves the head's 60 s).
    upstreamIdleMs: idle,
    upstreamTimeoutMs: idle > 0 ? idle : DEFAULT_UPSTREAM_TIMEOUT_MS,
    buffers: new BufferBudget(MiB * (o.bufferMib ?? DEFAULT_BUFFER_MIB)),
    unread: new UnreadAnswers(MiB * (o.unreadMib ?? DEFAULT_UNREAD_MIB), undefined, log),
  };
  // The engine asks the ingress whether a forward-internal target is there and what IP policies say (cloud-endpoints.ts).
  servePolicyLookups(deps, () => table.now);
  const contexts = new TlsContexts(ca, () => table.now);
  const limits = { ...LISTENER_LIMITS, ...o.limits };
  // Loaded only with --acme-directory: acme-client (and axios) cost a tenth of a second of every start (issue 29).
  const acme = o.acme ? new (await import('./acme/manager.js')).AcmeManager({ settings: o.acme, ctx: o.ctx, table, listenerPorts: o.listeners.map((l) => l.publicPort), metrics: o.metrics, log: deps.log }) : undefined;
  const intercept = acme ? new AcmeIntercept(acme.challenges, limits, deps.log) : undefined;
  // Where a plain-HTTP listener sends a name served over TLS: the TLS listeners' public ports.
  const tlsPorts = o.listeners.filter((l) => !l.plain).map((l) => l.publicPort);
  const listeners = o.listeners.map((spec) => new IngressListener({ ...spec }, { live: table, contexts, deps, metrics: o.metrics, limits, acme: intercept, tlsPorts }));
  let agentTcp: AgentTcpListeners | undefined;
  try {
    for (const l of listeners) await l.listen();
    if (o.agentTcpPorts) agentTcp = await startAgentTcp(o.listeners[0].host, o.agentTcpPorts, deps, limits.maxConnections);
  } catch (e) {
    await Promise.all(listeners.map((l) => l.drain(0)));
    await table.stop();
    throw e;
  }
  acme?.start();
  return {
    listeners: listeners.map((l) => ({ ...l.spec, address: l.address })),
    agentTcpPorts: agentTcp?.ports ?? [],
    caFile: ca.certFile,
    table,
    deps,
    changed: (ids) => table.changed(ids),
    async drain(deadlineMs) {
      // An order under way is not waited for long: it is placed again after a restart.
      await acme?.stop(Math.min(deadlineMs, 5000));
      await Promise.all([...listeners.map((l) => l.drain(deadlineMs)), agentTcp?.drain(deadlineMs)]);
      await table.stop();
    },
  };
}
