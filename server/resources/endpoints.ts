// Endpoint behaviours the catalog cannot express (provider/catalog/endpoints.ts): the read
// form of agents' endpoints, which the gateway writes as children of their tunnels and the
// API never changes; and the URL rule: one endpoint per URL unless every endpoint there
// enables pooling (the service's 409), and none at a host:port an edge or an agent holds.
import { cloudEndpoint } from '../../provider/catalog/endpoints.js';
import { ipPolicy } from '../../provider/catalog/ip-policies.js';
import { tunnel, tunnelSession } from '../../provider/catalog/tunnels.js';
import { parseTrafficPolicy } from '../../provider/catalog/validate/traffic-policy.js';
import { parseEndpointUrl, type EndpointUrl } from '../../provider/catalog/validate/endpoint-url.js';
import { ENDPOINT_SCOPE, endpointKey } from '../gateway/live-rows.js';
import { ApiError } from '../http/errors.js';
import type { Writes } from '../store/hot-writes.js';
import { behaviour, type Doc, type StoredResource } from './behaviours.js';
import { uriOf } from './engine.js';

/** An agent's endpoint is the child of its tunnel; a cloud endpoint has no parent. */
export const isAgentEndpoint = (row: Pick<StoredResource, 'parentId'>) => row.parentId !== null;

const urlOf = (text: string): EndpointUrl => parseEndpointUrl(text) as EndpointUrl;

function readOnly(id: string) {
  return new ApiError('ERR_SERVICE_362', `endpoint ${id} is an agent endpoint: its agent made it and it goes when the agent does; stop the agent (or its session) instead`, { id, type: 'agent' });
}

/**
 * Refuses a URL another endpoint holds unless both pool (409, naming the holder), and a
 * host:port an HTTPS, TCP or TLS edge or an agent's endpoint holds. The URL's name lock makes
 * two writers of one URL (on PostgreSQL; SQLite has one writer) check one after the other.
 */
async function checkUrl(tx: Writes, id: string, body: Doc) {
  const u = urlOf(body.url);
  await tx.lockName(`endpoint-url:${u.url}`);
  for (const row of await tx.ofKind(cloudEndpoint.kind)) {
    if (row.id === id || row.parentId !== null) continue;
    const other = (row.data as { body: Doc }).body;
    if (other.url !== u.url) continue;
    if (body.pooling_enabled && other.pooling_enabled) continue;
    const why = body.pooling_enabled ? 'it does not enable pooling' : 'this one does not enable pooling';
    throw new ApiError('ERR_SERVICE_320', `url: ${u.url} is already used by endpoint ${row.id}, and ${why}; enable pooling_enabled on both to share it`, { field: 'url', value: u.url, conflicting_id: row.id });
  }
  const taken = await tx.takenKeys([{ scope: 'hostport', value: u.hostport }, { scope: ENDPOINT_SCOPE, value: endpointKey(u.url) }], id);
  if (taken.length && !u.internal) {
    const t = taken[0];
    const what = t.scope === 'hostport' ? 'an edge' : 'an agent\'s endpoint';
    throw new ApiError('ERR_SERVICE_320', `url: ${u.hostport} is served by ${what} (${t.resourceId})`, { field: 'url', value: u.url, conflicting_id: t.resourceId });
  }
}

/**
 * The IP policies the policy's restrict-ips actions name (`ip_policies`) must exist: an id that
 * does not is 400 ERR_SERVICE_107, as any reference to a missing resource. (One deleted later
 * has no rules at the ingress: server/ingress/cloud-endpoints.ts.)
 */
async function checkIpPolicies(tx: Writes, body: Doc) {
  const r = typeof body.traffic_policy === 'string' ? parseTrafficPolicy(body.traffic_policy) : undefined;
  if (!r?.ok) return;
  const named = new Set<string>();
  for (const rules of Object.values(r.policy as Record<string, { actions?: { type?: string; config?: { ip_policies?: unknown } }[] }[] | undefined>)) {
    for (const rule of rules ?? []) for (const a of rule.actions ?? []) if (a.type === 'restrict-ips' && Array.isArray(a.config?.ip_policies)) for (const id of a.config!.ip_policies) named.add(String(id));
  }
  if (!named.size) return;
  const found = new Set((await tx.resources([...named])).filter((row) => row.kind === ipPolicy.kind).map((row) => row.id));
  for (const id of named) if (!found.has(id)) throw new ApiError('ERR_SERVICE_107', `traffic_policy: restrict-ips names IP policy ${id}, which does not exist`, { field: 'traffic_policy', id });
}

behaviour(cloudEndpoint.kind, {
  changing: ({ row }) => {
    if (isAgentEndpoint(row)) throw readOnly(row.id);
  },
  prepare: async ({ id, body, tx }) => {
    if (tx) await checkUrl(tx, id, body);
    if (tx) await checkIpPolicies(tx, body);
  },
  created: async ({ id, body, tx }) => {
    await checkUrl(tx, id, body);
    await checkIpPolicies(tx, body);
  },
  deleting: ({ row }) => {
    if (isAgentEndpoint(row)) throw readOnly(row.id);
  },
  read: async ({ row, out, ctx, rows }) => {
    if (!isAgentEndpoint(row)) {
      const u = urlOf(row.body.url);
      Object.assign(out, { public_url: u.url, proto: u.scheme, hostport: u.hostport, upstream_url: null, tunnel: null, tunnel_session: null });
      return;
    }
    const publicUrl = String(row.computed.public_url);
    const parsed = parseEndpointUrl(publicUrl);
    const t = await rows.resource(row.parentId!);
    const tc = (t?.data as { computed?: Doc } | undefined)?.computed ?? {};
    Object.assign(out, {
      type: 'agent',
      url: publicUrl,
      public_url: publicUrl,
      proto: row.computed.proto ?? (typeof parsed === 'string' ? null : parsed.scheme),
      hostport: typeof parsed === 'string' ? null : parsed.hostport,
      traffic_policy: null,
      bindings: Array.isArray(row.computed.bindings) ? row.computed.bindings : ['public'],
      pooling_enabled: row.computed.pooling_enabled === true,
      description: '',
      metadata: typeof tc.metadata === 'string' ? tc.metadata : '',
      upstream_url: typeof tc.forwards_to === 'string' ? tc.forwards_to : null,
      tunnel: { id: row.parentId, uri: uriOf(ctx, tunnel, row.parentId!) },
      tunnel_session: t?.parentId ? { id: t.parentId, uri: uriOf(ctx, tunnelSession, t.parentId) } : null,
    });
  },
});
