// Cloud endpoints at the ingress (issue 36): an endpoint's traffic policy answers every
// request at its URL. Consulted when no edge and no agent's endpoint serves the name (edges
// win, as they do over agents' endpoints). An internal endpoint (.internal) is never served
// from outside. Several endpoints at one URL with pooling form a pool: each request goes to
// the next member in turn, and a deleted member is out of the next table at once.
import { cloudEndpoint } from '../../provider/catalog/endpoints.js';
import { parseEndpointUrl, type EndpointUrl } from '../../provider/catalog/validate/endpoint-url.js';
import { endpointChain, serveEndpoint } from './agent-endpoints.js';
import { runChain } from './http/chain.js';
import { errorAnswer } from './http/error-page.js';
import type { HttpExchange } from './http/exchange.js';
import { trafficPolicy } from './modules/traffic-policy.js';
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
