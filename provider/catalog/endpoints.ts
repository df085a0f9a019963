// Endpoints as the service has them now (issue 36): one collection, /endpoints, of cloud
// endpoints (made through the API, their traffic policy answers every request) and agent
// endpoints (the read-only records of agents' tunnels, written by the gateway). A host
// under `.internal` binds an endpoint `internal`: reachable only through forward-internal.
import { z } from 'zod';
import { defineKind, type Refinement } from './define.js';
import { description, following, metadata, ref, stable } from './fields.js';
import { decidingPhase, parseEndpointUrl } from './validate/endpoint-url.js';
import { fallThrough } from './validate/terminating.js';
import { parseTrafficPolicy } from './validate/traffic-policy.js';

export const BINDINGS = ['public', 'internal'] as const;

const endpointUrl = () =>
  z.string().max(2048).superRefine((v, ctx) => {
    const u = parseEndpointUrl(v);
    if (typeof u === 'string') ctx.addIssue({ code: 'custom', message: u });
  });

/** The whole policy language; which phases apply follows from the URL's scheme (checked in `refine`). */
const policyText = () =>
  z.string().min(1, 'a cloud endpoint needs a traffic policy: it has no upstream, its policy answers every request').max(65536).superRefine((v, ctx) => {
    const r = parseTrafficPolicy(v);
    if (!r.ok) for (const issue of r.issues) ctx.addIssue({ code: 'custom', message: issue.message, params: { policyPath: issue.path } });
  });

/**
 * Bindings agree with the host (`internal` exactly for `.internal` hosts), and the policy
 * ends every request of the URL's scheme in a terminating action (the rule that can fall
 * through is named). TCP and TLS endpoints take no HTTP phases.
 */
const refineEndpoint: Refinement = (doc, ctx) => {
  const u = typeof doc.url === 'string' ? parseEndpointUrl(doc.url) : undefined;
  if (!u || typeof u === 'string') return;
  const bindings: string[] = doc.bindings ?? [];
  if (bindings.length) {
    if (u.internal && bindings[0] !== 'internal') ctx.addIssue({ code: 'custom', path: ['bindings'], message: `${u.host} is an internal host (under .internal): its binding is internal` });
    if (!u.internal && bindings[0] === 'internal') ctx.addIssue({ code: 'custom', path: ['bindings'], message: `an internal endpoint's host ends in .internal; ${u.host} does not` });
  }
  if (typeof doc.traffic_policy !== 'string') return;
  const r = parseTrafficPolicy(doc.traffic_policy);
  if (!r.ok) return;
  // A route module's action runs only where the module can (an edge's route): never accepted here and skipped.
  for (const [ph, rules] of Object.entries(r.policy)) {
    for (const [i, rule] of ((rules ?? []) as { actions?: { type?: string }[] }[]).entries()) {
      const j = (rule.actions ?? []).findIndex((a) => typeof a.type === 'string' && a.type.startsWith('module-'));
      if (j < 0) continue;
      ctx.addIssue({ code: 'custom', path: ['traffic_policy'], message: `${rule.actions![j].type} is a route module's action: it runs on an edge's route only (edgeform policy show prints them); a cloud endpoint's policy uses the service's actions (restrict-ips, basic-auth, ...)`, params: { policyPath: `${ph}[${i}].actions[${j}].type` } });
      return;
    }
  }
  const phase = decidingPhase(u.scheme);
  if (phase === 'on_tcp_connect' && (r.policy.on_http_request || r.policy.on_http_response)) {
    ctx.addIssue({ code: 'custom', path: ['traffic_policy'], message: `a ${u.scheme} endpoint carries connections, not HTTP requests: its policy has on_tcp_connect only`, params: { policyPath: r.policy.on_http_request ? 'on_http_request' : 'on_http_response' } });
    return;
  }
  if (phase === 'on_http_request' && r.policy.on_tcp_connect) {
    ctx.addIssue({ code: 'custom', path: ['traffic_policy'], message: `an ${u.scheme} endpoint's policy has on_http_request and on_http_response, not on_tcp_connect`, params: { policyPath: 'on_tcp_connect' } });
    return;
  }
  const open = fallThrough(r.policy, phase);
  if (open) ctx.addIssue({ code: 'custom', path: ['traffic_policy'], message: open.message, params: { policyPath: open.path } });
};

/** Bindings follow the host when left out; the URL is stored in its canonical spelling. */
function normalizeEndpoint(doc: Record<string, any>) {
  const u = parseEndpointUrl(doc.url);
  if (typeof u === 'string') return doc;
  return { ...doc, url: u.url, bindings: doc.bindings?.length ? doc.bindings : [u.internal ? 'internal' : 'public'] };
}

export const cloudEndpoint = defineKind({
  kind: 'CloudEndpoint',
  type: 'cloud_endpoint',
  prefix: 'ep',
  path: '/endpoints',
  envelope: 'endpoints',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'An endpoint: a cloud endpoint, whose traffic policy answers every request at its URL (internal when bound under .internal), or the read-only record of an agent\'s endpoint (type agent).',
  naturalKey: 'url',
  body: {
    type: z.literal('cloud', { error: 'only cloud endpoints are made through the API; agents make agent endpoints' }).default('cloud')
      .describe('cloud (the default; agent endpoints are listed with type agent, made by agents).'),
    url: endpointUrl().describe('Where the endpoint listens: https://host, http://host, tls://host or tcp://host:PORT (a port when not the scheme\'s default). A host under .internal makes an internal endpoint.'),
    traffic_policy: policyText().describe('The traffic policy, as YAML or JSON text. It must end every request (or connection) with a terminating action: deny, custom-response, redirect or forward-internal.'),
    bindings: z.array(z.enum(BINDINGS)).max(1, 'at most one binding').optional()
      .describe('public (reachable from outside) or internal (only through forward-internal; the host must end in .internal). Follows the host when left out.'),
    pooling_enabled: z.boolean().default(false).describe('Endpoints with the same URL that all enable pooling share its traffic; without it a second endpoint with a taken URL is refused (409).'),
    description: description(),
    metadata: metadata(),
  },
  readOverrides: {
    type: z.enum(['cloud', 'agent']).describe('cloud, or agent for an agent\'s endpoint (read-only).'),
    bindings: z.array(z.enum(BINDINGS)),
    traffic_policy: z.string().nullable(),
  },
  computed: {
    // Derived from the URL alone: a plan that leaves the URL keeps them.
    ...following(['url'], {
      public_url: z.string().describe('The URL (the service\'s older name for it).'),
      proto: z.string().describe('The URL\'s scheme.'),
      hostport: z.string().describe('host:port.'),
    }),
    // Null for every cloud endpoint, the only kind a plan manages.
    ...stable({
      upstream_url: z.string().nullable().describe('Where an agent endpoint forwards (null for cloud endpoints).'),
      tunnel: ref().nullable().describe('The tunnel of an agent endpoint (null for cloud endpoints).'),
      tunnel_session: ref().nullable().describe('The agent session of an agent endpoint (null for cloud endpoints).'),
    }),
  },
  refine: refineEndpoint,
  normalize: normalizeEndpoint,
  madeByAgents: (read) => read.type === 'agent',
});
