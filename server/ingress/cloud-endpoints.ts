// Cloud endpoints at the ingress (issue 36): an endpoint's traffic policy answers every
// request at its URL. Consulted when no edge and no agent's endpoint serves the name (edges
// win, as they do over agents' endpoints). An internal endpoint (.internal) is never served
// from outside. Several endpoints at one URL with pooling form a pool: each request goes to
// the next member in turn, and a deleted member is out of the next table at once. TCP and TLS
// cloud endpoints decide each connection in on_tcp_connect (connectCloudEndpoint);
// forward-internal reaches agents' internal endpoints (and pools) before cloud ones.
import type net from 'node:net';
import tls from 'node:tls';
import { cloudEndpoint } from '../../provider/catalog/endpoints.js';
import { setIpPolicyLookup, type IpPolicyVerdict } from '../policy/actions/restrict-ips.js';
import { setForwardInternal } from '../policy/actions/service.js';
import { addressKey } from './ip-rules.js';
import { compilePolicy, evaluate, isCompiled, type CompiledPolicy } from '../policy/index.js';
import { parseEndpointUrl, type EndpointUrl } from '../../provider/catalog/validate/endpoint-url.js';
import { endpointChain, serveEndpoint } from './agent-endpoints.js';
import { runChain } from './http/chain.js';
import { errorAnswer } from './http/error-page.js';
import type { HttpExchange } from './http/exchange.js';
import { trafficPolicy } from './modules/traffic-policy.js';
import { spliceThroughTunnel } from './tcp.js';
import type { SnapshotRow } from './table.js';
import type { CloudEndpointEntry, EdgeAnswer, Exchange, HttpFilter, IngressDeps, IngressTable } from './types.js';

export const isCloudEndpointRow = (r: Pick<SnapshotRow, 'kind' | 'parentId'>) => r.kind === cloudEndpoint.kind && r.parentId === null;

/** The endpoints by lower-case host, members of a pool oldest first. Pure. */
export function compileCloudEndpoints(rows: Iterable<SnapshotRow>): Map<string, CloudEndpointEntry[]> {
  const out = new Map<string, CloudEndpointEntry[]>();
  const sorted = [...rows].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1));
  for (const r of sorted) {
    const u = parseEndpointUrl(String(r.doc.url));
    if (typeof u === 'string') continue;
    const entry: CloudEndpointEntry = { id: r.id, url: u as EndpointUrl, pooling: r.doc.pooling_enabled === true, trafficPolicy: String(r.doc.traffic_policy ?? '') };
    const list = out.get(u.host);
    if (list) list.push(entry);
    else out.set(u.host, [entry]);
  }
  return out;
}

/**
 * The pools' rotation, per host list of a table (per instance): the counters go with the table
 * that made the list, so a deleted URL leaves none behind; a new table starts its turns over.
 */
const turns = new WeakMap<CloudEndpointEntry[], Map<string, number>>();
function nextOf(list: CloudEndpointEntry[], url: string, members: CloudEndpointEntry[]): CloudEndpointEntry {
  let byUrl = turns.get(list);
  if (!byUrl) turns.set(list, (byUrl = new Map()));
  const turn = byUrl.get(url) ?? 0;
  byUrl.set(url, (turn + 1) % 1_000_000);
  return members[turn % members.length];
}

/**
 * The member that serves a request from outside for `host`, when a public http or https cloud
 * endpoint has it: internal ones are left out (reachable only through forward-internal).
 */
export function publicCloudEndpoint(table: IngressTable, host: string): CloudEndpointEntry | undefined {
  const list = table.cloudEndpoints?.get(host);
  const members = list?.filter((e) => !e.url.internal && (e.url.scheme === 'https' || e.url.scheme === 'http'));
  if (!members?.length) return undefined;
  return members.length === 1 ? members[0] : nextOf(list!, members[0].url.url, members);
}


/** Each entry's policy filter, compiled once per entry (a table change makes new entries). */
const filters = new WeakMap<CloudEndpointEntry, HttpFilter>();
export function cloudEndpointFilter(entry: CloudEndpointEntry, deps: IngressDeps): HttpFilter {
  let f = filters.get(entry);
  if (!f) filters.set(entry, (f = trafficPolicy({ value: entry.trafficPolicy }, { id: entry.id }, deps)));
  return f;
}

/**
 * What a request gets when no rule of its endpoint's policy ended it (the API refuses such a
 * policy, but one written before a change of the language, or a rule whose expression failed,
 * can still let one through): the service's answer for a non-terminating cloud endpoint policy.
 */
export async function fellThrough(ex: Exchange, endpointId = ex.route.id): Promise<void> {
  ex.answer(errorAnswer('ERR_SERVICE_760', `the traffic policy of cloud endpoint ${endpointId} ended no action for this request`));
}

/** How many internal endpoints one request may pass through (a policy forwarding to itself, or two to each other, stops here). */
export const MAX_FORWARDS = 8;

/**
 * The tunnel of the agent's internal endpoint (or the pool member) at `url` that takes the next
 * request, if an agent bound one (gateway.pickInternalTunnel; an ingress worker's gateway,
 * server/cluster/worker.ts, knows none).
 */
export function agentInternalTunnel(deps: IngressDeps, url: string): string | undefined {
  const u = parseEndpointUrl(url);
  if (typeof u === 'string' || !u.internal) return undefined;
  const g = deps.gateway as Partial<Pick<IngressDeps['gateway'], 'pickInternalTunnel'>>;
  return g.pickInternalTunnel?.(u.scheme === 'tcp' ? u.url : `${u.scheme}://${u.host}`);
}

/**
 * forward-internal's `on_error: continue` (issue 36): the engine asks, while it evaluates,
 * whether the URL has an endpoint; for an ingress's evaluations (known by its PolicyState) the
 * answer is whether an agent's internal endpoint is online there or an internal cloud endpoint
 * is in its current table. No: the action does nothing and the policy's next actions run. With
 * `on_error: halt` the engine is told yes, and the ingress answers a missing target itself
 * (502 ERR_SERVICE_761). An upstream that fails once forwarded is that upstream's answer.
 */
const forwardTargets = new WeakMap<object, (url: string) => boolean>();
setForwardInternal((url, _binding, state, onError) => {
  if (onError !== 'continue') return true;
  const known = forwardTargets.get(state);
  return known ? known(url) : true;
});
/**
 * restrict-ips' `ip_policies` (issue 36): the IP policies of the ingress's current table, by id
 * (their rules as an edge's ip_restriction reads them: any deny rule holding the address
 * refuses it; with allow rules, one must hold it). An id the table does not have (deleted since)
 * has no rules.
 */
const ipPolicyLookups = new WeakMap<object, (ids: readonly string[], ip: string) => IpPolicyVerdict>();
setIpPolicyLookup((state, ids, ip) => ipPolicyLookups.get(state)?.(ids, ip));

/** Registers what the engine asks an ingress while it evaluates (forward-internal targets, IP policies). */
export function servePolicyLookups(deps: IngressDeps, table: () => IngressTable): void {
  ipPolicyLookups.set(deps.policyState, (ids, ip) => {
    const t = table();
    const key = addressKey(ip.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, ''));
    const v: IpPolicyVerdict = { hasAllow: false };
    for (const id of ids) {
      const set = t.ipPolicies.get(id);
      if (!set || set.size === 0) continue;
      if (set.hasAllow) v.hasAllow = true;
      // An address that is not an IP is refused once any rule exists.
      if (!key) v.denied ??= `IP policy ${id} (not an IP address)`;
      else if (set.holds(key, 'deny')) v.denied ??= `IP policy ${id}`;
      else if (set.holds(key, 'allow')) v.allowed ??= `IP policy ${id}`;
    }
    return v;
  });
  forwardTargets.set(deps.policyState, (url) => {
    const u = parseEndpointUrl(url);
    if (typeof u === 'string' || !u.internal) return false;
    const g = deps.gateway as Partial<Pick<IngressDeps['gateway'], 'hasInternalTunnel'>>;
    if (g.hasInternalTunnel?.(u.scheme === 'tcp' ? u.url : `${u.scheme}://${u.host}`)) return true;
    return !!table().cloudEndpoints?.get(u.host)?.some((e) => e.url.internal && e.url.url === u.url);
  });
}

/** The member of the internal endpoint (or pool) at `url` that takes the next request. */
function internalMember(table: IngressTable, url: string): CloudEndpointEntry | undefined {
  const u = parseEndpointUrl(url);
  if (typeof u === 'string') return undefined;
  const list = table.cloudEndpoints?.get(u.host);
  const members = list?.filter((e) => e.url.internal && e.url.url === u.url);
  if (!members?.length) return undefined;
  return members.length === 1 ? members[0] : nextOf(list!, u.url, members);
}

/**
 * forward-internal at the ingress: the request goes to the internal endpoint at `url` (a pool
 * member in turn), whose policy answers it as its own. None there: 502 ERR_SERVICE_761; more
 * than MAX_FORWARDS hops: 502 ERR_SERVICE_762.
 */
export async function forwardInternal(ex: Exchange, url: string, deps: IngressDeps): Promise<void> {
  const hops = (ex.locals.forwardInternal as number | undefined) ?? 0;
  if (hops >= MAX_FORWARDS) return ex.answer(errorAnswer('ERR_SERVICE_762', `forward-internal passed through ${MAX_FORWARDS} endpoints without an answer (a loop?); the last went to ${url}`));
  ex.locals.forwardInternal = hops + 1;
  // An agent's internal endpoint (or pool) there takes it first: its modules, then its upstream.
  const tunnel = agentInternalTunnel(deps, url);
  if (tunnel) {
    const { chain } = endpointChain(deps, tunnel);
    if (!Array.isArray(chain)) return ex.answer(chain as EdgeAnswer);
    const relay = (e: Exchange) => serveEndpoint(e as HttpExchange, tunnel);
    return chain.length ? runChain(chain as readonly HttpFilter[], ex as HttpExchange, relay) : relay(ex);
  }
  const member = internalMember(ex.table, url);
  if (!member) return ex.answer(errorAnswer('ERR_SERVICE_761', `no internal endpoint is at ${url}`));
  await cloudEndpointFilter(member, deps).handle(ex, () => fellThrough(ex, member.id));
}

// ---- TCP and TLS cloud endpoints: connections, decided by on_tcp_connect -------------------

/**
 * The member of a public TLS cloud endpoint (pool) at this server name and public port, when
 * no edge and no agent's endpoint has the name (the listener asks only then).
 */
export function publicTlsCloudEndpoint(table: IngressTable, host: string, publicPort: number): CloudEndpointEntry | undefined {
  const list = table.cloudEndpoints?.get(host);
  const members = list?.filter((e) => !e.url.internal && e.url.scheme === 'tls' && e.url.port === publicPort);
  if (!members?.length) return undefined;
  return members.length === 1 ? members[0] : nextOf(list!, members[0].url.url, members);
}

/** The public TCP cloud endpoints by port, per table (a TCP connection has no name: the port chooses). */
const tcpByPort = new WeakMap<ReadonlyMap<string, CloudEndpointEntry[]>, Map<number, CloudEndpointEntry[]>>();
export function publicTcpCloudEndpoint(table: IngressTable, publicPort: number): CloudEndpointEntry | undefined {
  const all = table.cloudEndpoints;
  if (!all?.size) return undefined;
  let byPort = tcpByPort.get(all);
  if (!byPort) {
    byPort = new Map();
    for (const list of all.values()) {
      for (const e of list) {
        if (e.url.internal || e.url.scheme !== 'tcp') continue;
        const at = byPort.get(e.url.port);
        if (at) at.push(e);
        else byPort.set(e.url.port, [e]);
      }
    }
    tcpByPort.set(all, byPort);
  }
  const members = byPort.get(publicPort);
  if (!members?.length) return undefined;
  // Endpoints at one port under different names cannot be told apart: the oldest URL's pool serves.
  const url = members[0].url.url;
  const pool = members.filter((e) => e.url.url === url);
  return pool.length === 1 ? pool[0] : nextOf(members, url, pool);
}

/** Each tcp/tls entry's on_tcp_connect policy, compiled once per entry; null if it does not compile. */
const tcpPolicies = new WeakMap<CloudEndpointEntry, CompiledPolicy | null>();
function tcpPolicyOf(entry: CloudEndpointEntry): CompiledPolicy | null {
  let p = tcpPolicies.get(entry);
  if (p === undefined) {
    const compiled = compilePolicy(entry.trafficPolicy, { phases: ['on_tcp_connect'], scope: entry.id });
    tcpPolicies.set(entry, (p = isCompiled(compiled) ? compiled : null));
  }
  return p;
}

/**
 * A connection to a TCP or TLS cloud endpoint: its on_tcp_connect phase decides. `restrict-ips`
 * or `deny` close it; `forward-internal` splices it (a TLS one still encrypted) to the agent's
 * internal endpoint at the URL (a pool member in turn), or hands it to an internal cloud
 * endpoint, whose own on_tcp_connect decides (at most MAX_FORWARDS hops). A connection no rule
 * ended, or forwarded to nothing, is closed; the access-log line says why (`refused`).
 */
export function connectCloudEndpoint(socket: net.Socket, entry: CloudEndpointEntry, table: IngressTable, deps: IngressDeps & { publicPort: number }, line: Record<string, unknown>, hops = 0): void {
  line.endpoint = entry.id;
  const ip = String(line.client_ip ?? '');
  const policy = tcpPolicyOf(entry);
  // A policy that no longer compiles refuses rather than lets everyone through.
  if (!policy) return refuse(socket, line, 'traffic_policy_invalid');
  const version = socket instanceof tls.TLSSocket ? socket.getProtocol()?.replace(/^TLSv/, '') : undefined;
  const r = evaluate(policy, 'on_tcp_connect', { now: deps.now(), conn: { client_ip: ip, server_port: deps.publicPort, client_port: socket.remotePort, server_ip: socket.localAddress, ...(version ? { tls_version: version } : {}) }, endpoint: { id: entry.id } }, deps.policyState);
  for (const metadata of r.mutations.logs ?? []) deps.log({ level: 'info', msg: 'traffic policy log action', endpoint: entry.id, metadata });
  if (r.outcome === 'continue') return refuse(socket, line, 'ERR_SERVICE_760');
  if (r.outcome === 'close' || r.outcome === 'answered' || !('forward_internal' in r.outcome)) return refuse(socket, line, 'traffic_policy');
  const url = r.outcome.forward_internal.url;
  if (hops >= MAX_FORWARDS) return refuse(socket, line, 'ERR_SERVICE_762');
  line.forwarded_to = url;
  const tunnel = agentInternalTunnel(deps, url);
  if (tunnel) return spliceThroughTunnel(socket, tunnel, deps, ip, line);
  const member = internalMember(table, url);
  if (member && (member.url.scheme === 'tcp' || member.url.scheme === 'tls')) return connectCloudEndpoint(socket, member, table, deps, line, hops + 1);
  refuse(socket, line, 'ERR_SERVICE_761');
}

function refuse(socket: net.Socket, line: Record<string, unknown>, why: string) {
  line.refused = why;
  socket.destroy();
}
