// TCP edges and TLS edges: one client connection becomes one stream through an agent to the
// edge's backend (a tunnel-group backend, chosen as the HTTP side chooses, backends/resolve.ts),
// after the edge's ip_restriction and the on_tcp_connect phase of its traffic policy. For a
// TLS edge the socket is either the raw connection (TLS passes through untouched, terminate_at
// upstream or agent) or the decrypted one (terminate_at edge). One JSON access-log line per
// connection: edge, client, outcome, bytes each way, duration; never a byte of the traffic.
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { Metrics } from '../http/metrics.js';
import { compilePolicy, evaluate, isCompiled, type CompiledPolicy } from '../policy/index.js';
import { relayTcp } from './backends/relay.js';
import { resolveBackend } from './backends/resolve.js';
import { ipAllowed } from './modules/ip-restriction.js';
import { streamPolicy } from '../policy/route.js';
import type { Runner } from '../policy/actions/run.js';
import { MODULE_ACTIONS } from '../../provider/catalog/validate/policy/actions/modules.js';
import type { IngressDeps, IngressTable, StreamEdgeEntry } from './types.js';

export interface StreamDeps extends IngressDeps {
  metrics: Metrics;
  publicPort: number;
}

const enabled = (m: { enabled?: boolean } | null | undefined) => !!m && m.enabled !== false;

/** What the connection's module actions are given (RunContext.host). */
interface StreamHost { table: IngressTable; ip: string }

/** ip_restriction as an action on a connection: refused connections are closed. */
function streamModuleRunner(type: string, config: unknown): Runner | undefined {
  if (type !== MODULE_ACTIONS.ip_restriction) return undefined;
  const c = config as { ip_policy_ids?: string[]; ip_policies?: { id: string }[] };
  const ids = c.ip_policy_ids ?? (c.ip_policies ?? []).map((p) => p.id);
  return (ctx) => {
    const host = ctx.host as StreamHost;
    return ipAllowed(host.table, ids, host.ip) ? { did: `${type}: allowed` } : { ended: 'close', did: `${type}: ${host.ip} refused` };
  };
}

/**
 * The edge's chain (its ip_restriction, then its policy's on_tcp_connect rules: server/policy/route.ts),
 * compiled once per table version (the entry is per table); null if it does not compile.
 */
function policyOf(edge: StreamEdgeEntry): CompiledPolicy | null {
  if (edge.compiled === undefined) {
    let compiled: CompiledPolicy | null = null;
    const own = enabled(edge.doc.traffic_policy) ? compilePolicy(String(edge.doc.traffic_policy.value), { phases: ['on_tcp_connect'], scope: edge.doc.id, moduleRunner: streamModuleRunner }) : undefined;
    const shape = streamPolicy(edge.doc);
    if ((own === undefined || isCompiled(own)) && !('problems' in shape)) {
      const c = compilePolicy(JSON.stringify(shape.policy), { phases: ['on_tcp_connect'], scope: edge.doc.id, moduleRunner: streamModuleRunner });
      compiled = isCompiled(c) ? c : null;
    }
    edge.compiled = compiled;
  }
  return edge.compiled as CompiledPolicy | null;
}

/** The client's address without IPv4-mapped IPv6 dressing. */
export const clientIpOf = (socket: net.Socket) => (socket.remoteAddress ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');

/** Why a connection is refused (the access log's `refused`); undefined when it may go on. */
function refusal(socket: net.Socket, edge: StreamEdgeEntry, table: IngressTable, deps: StreamDeps): string | undefined {
  if (!enabled(edge.doc.ip_restriction) && !enabled(edge.doc.traffic_policy)) return undefined;
  const ip = clientIpOf(socket);
  const policy = policyOf(edge);
  // A policy that no longer compiles refuses rather than lets everyone through.
  if (!policy) return 'traffic_policy_invalid';
  const version = socket instanceof tls.TLSSocket ? socket.getProtocol()?.replace(/^TLSv/, '') : undefined;
  const host: StreamHost = { table, ip };
  const r = evaluate(policy, 'on_tcp_connect', { now: deps.now(), conn: { client_ip: ip, server_port: deps.publicPort, client_port: socket.remotePort, server_ip: socket.localAddress, ...(version ? { tls_version: version } : {}) }, endpoint: { id: edge.doc.id } }, deps.policyState, host);
  // The log action's lines (on_tcp_connect has no action that waits).
  for (const metadata of r.mutations.logs ?? []) deps.log({ level: 'info', msg: 'traffic policy log action', edge: edge.doc.id, metadata });
  if (r.outcome === 'continue') return undefined;
  return r.rules[r.rules.length - 1]?.actions.some((a) => a.type === MODULE_ACTIONS.ip_restriction) ? 'ip_restriction' : 'traffic_policy';
}

/** Carries one client connection of a TCP or TLS edge to its backend, or closes it. */
export function streamEdge(socket: net.Socket, edge: StreamEdgeEntry, table: IngressTable, deps: StreamDeps, servername: string | undefined): void {
  const started = deps.now();
  const edgeId = edge.doc.id;
  const line: Record<string, unknown> = { msg: 'ingress connection', kind: edge.kind, edge: edgeId, public_port: deps.publicPort, client_ip: clientIpOf(socket), ...(servername ? { server_name: servername } : {}) };
  socket.on('error', () => {});
  socket.once('close', () => {
    const bytesIn = socket.bytesRead;
    const bytesOut = socket.bytesWritten;
    deps.metrics.ingressBytes.inc({ edge: edgeId, direction: 'in' }, bytesIn);
    deps.metrics.ingressBytes.inc({ edge: edgeId, direction: 'out' }, bytesOut);
    deps.log({ level: 'info', ...line, bytes_in: bytesIn, bytes_out: bytesOut, duration_ms: deps.now() - started });
  });
  const refused = refusal(socket, edge, table, deps);
  if (refused) {
    line.refused = refused;
    return void socket.destroy();
  }
  const chosen = resolveBackend(table, enabled(edge.doc.backend) ? edge.doc.backend.backend_id : undefined, deps);
  if (chosen.type !== 'tunnel') {
    line.refused = chosen.type === 'error' ? chosen.code : 'backend_not_a_stream';
    return void socket.destroy();
  }
  spliceThroughTunnel(socket, chosen.tunnelId, deps, line.client_ip as string, line);
}

/**
 * A client's connection spliced through a tunnel, both ways: TCP and TLS edges, agents' TCP
 * endpoints and tls endpoints. A client address past its relays through agents is closed (as
 * an HTTP request past them is answered 429 ERR_SERVICE_846); the access-log line, when
 * given, gets the tunnel and what refused the connection.
 */
export function spliceThroughTunnel(socket: Duplex, tunnelId: string, deps: IngressDeps, clientIp: string, line?: Record<string, unknown>): void {
  if (line) line.tunnel = tunnelId;
  const release = deps.relays?.take(clientIp);
  if (deps.relays && !release) {
    if (line) line.refused = 'ERR_SERVICE_846';
    return void socket.destroy();
  }
  if (release) socket.once('close', release);
  socket.pause();
  relayTcp({ deps, clientIp }, tunnelId).then(
    (stream) => {
      if (socket.destroyed) return void stream.destroy();
      stream.on('error', () => socket.destroy());
      stream.on('close', () => socket.destroy());
      socket.on('close', () => stream.destroy());
      socket.pipe(stream);
      stream.pipe(socket);
      socket.resume();
    },
    (e: { answer?: { code?: string } }) => {
      if (line) line.refused = e.answer?.code ?? 'upstream_failed';
      socket.destroy();
    },
  );
}
