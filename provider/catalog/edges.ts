// HTTPS, TCP and TLS edges, and HTTPS edge routes.
import { z } from 'zod';
import { defineKind, type Refinement } from './define.js';
import { description, hostport, metadata, stable } from './fields.js';
import { backendModule, httpsTlsTerminationModule, ipRestrictionModule, mutualTlsModule, tlsTerminationModule, trafficPolicyModule } from './modules.js';
import { AUTH_MODULES, routeModules } from './route-modules.js';
import { withTraits } from './traits.js';

const crud = ['create', 'read', 'list', 'update', 'delete'] as const;

const hostports = () =>
  withTraits(
    z
      .array(hostport())
      .max(128)
      .default([])
      .superRefine((list, ctx) => {
        const seen = new Set<string>();
        list.forEach((h, i) => {
          if (seen.has(h)) ctx.addIssue({ code: 'custom', path: [i], message: `hostport ${h} is listed twice` });
          seen.add(h);
        });
      }),
    { unique: { scope: 'hostport', what: 'hostport' } },
  ).describe('host:port pairs the edge serves; each belongs to at most one edge.');

/**
 * TLS-edge modules that need the edge's own handshake, refused when TLS passes through to
 * the upstream or the agent: verifying client certificates (nothing past the edge checks
 * them, so the protection would be accepted and enforced nowhere). Backends, IP restrictions
 * and on_tcp_connect policies see only the connection, so they stay allowed.
 */
const PLAINTEXT_TLS_MODULES = ['mutual_tls'] as const;

/** The error code of a TLS edge whose mutual_tls the edge could not enforce (server/http/validation.ts reads it). */
export const MUTUAL_TLS_PASSTHROUGH = 'ERR_SERVICE_120';

const MATCH = /^[^\s\0-\x1f\x7f]+$/;

export const httpsEdgeRoute = defineKind({
  kind: 'HTTPSEdgeRoute',
  type: 'https_edge_route',
  prefix: 'edghtsrt',
  path: '/edges/https/{edge_id}/routes',
  parent: { kind: 'HTTPSEdge', field: 'edge_id', in: 'path', nestAs: 'routes', embedded: true },
  operations: ['create', 'read', 'update', 'delete'],
  summary: 'A route of an HTTPS edge: a match on the request and the modules applied to what matches.',
  events: true,
  body: {
    match_type: z.enum(['exact_path', 'path_prefix']).describe('exact_path or path_prefix.'),
    match: withTraits(
      z.string().min(1).max(1024).regex(MATCH, 'must not contain whitespace or control characters').describe('Route selector: a path, a host, or host plus path; unique within the edge.'),
      { unique: { scope: 'match', perParent: true, what: 'route match' }, naturalKey: true },
    ),
    description: description(),
    metadata: metadata(),
    ...routeModules,
  },
  // SPEC's sample route carries `policy: null` and says nothing more of it; clients written
  // against the sample may read it, so it is always there and always null.
  computed: stable({ policy: z.string().nullable().describe('Always null (present in the sample route representation; its meaning is not specified).') }),
  refine: ((doc, ctx) => {
    const auth = AUTH_MODULES.filter((m) => doc[m] != null);
    if (auth.length > 1) ctx.addIssue({ code: 'custom', path: [auth[1]], message: `a route may carry at most one of ${AUTH_MODULES.join(', ')}; this one has ${auth.join(' and ')}` });
  }) satisfies Refinement,
});

export const httpsEdge = defineKind({
  kind: 'HTTPSEdge',
  type: 'https_edge',
  prefix: 'edghts',
  path: '/edges/https',
  envelope: 'https_edges',
  naturalKey: 'hostports',
  operations: crud,
  summary: 'Serves HTTPS on its hostports; its routes decide what happens to each request.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    hostports: hostports(),
    mutual_tls: mutualTlsModule(),
    tls_termination: httpsTlsTerminationModule(),
  },
  computed: { routes: z.array(httpsEdgeRoute.read).describe('The routes, oldest first.') },
});

export const tcpEdge = defineKind({
  kind: 'TCPEdge',
  type: 'tcp_edge',
  prefix: 'edgtcp',
  path: '/edges/tcp',
  envelope: 'tcp_edges',
  naturalKey: 'hostports',
  operations: crud,
  summary: 'Forwards TCP connections on its hostports to a backend.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    hostports: hostports(),
    backend: backendModule(),
    ip_restriction: ipRestrictionModule(),
    traffic_policy: trafficPolicyModule(['on_tcp_connect']),
  },
});

export const tlsEdge = defineKind({
  kind: 'TLSEdge',
  type: 'tls_edge',
  prefix: 'edgtls',
  path: '/edges/tls',
  envelope: 'tls_edges',
  naturalKey: 'hostports',
  operations: crud,
  summary: 'Serves TLS on its hostports, terminating at the edge, the agent or upstream.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    hostports: hostports(),
    backend: backendModule(),
    ip_restriction: ipRestrictionModule(),
    mutual_tls: mutualTlsModule(),
    tls_termination: tlsTerminationModule(),
    traffic_policy: trafficPolicyModule(['on_tcp_connect']),
  },
  refine: ((doc, ctx) => {
    // Where TLS ends, as the ingress reads it: a disabled tls_termination module is the default, the edge.
    const tt = doc.tls_termination;
    const at = tt && tt.enabled !== false ? tt.terminate_at : undefined;
    if (at !== 'upstream' && at !== 'agent') return;
    for (const m of PLAINTEXT_TLS_MODULES) {
      // A disabled module claims no protection.
      if (doc[m] != null && doc[m].enabled !== false) ctx.addIssue({ code: 'custom', path: [m], params: { errorCode: MUTUAL_TLS_PASSTHROUGH }, message: `${m} needs the edge to terminate TLS, but tls_termination.terminate_at is ${at}: the client's certificate would be checked nowhere; terminate at edge, or remove ${m}` });
    }
  }) satisfies Refinement,
});
