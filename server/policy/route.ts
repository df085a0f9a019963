// A route's modules as one policy: each enabled module a rule (named after it) of one
// `module-*` action, in MODULE_ORDER, with the route's own traffic_policy rules spliced in at
// that module's place. The ingress compiles and runs exactly this document (one engine, not a
// chain of filters beside it); `edgeform policy show` prints it, so `edgeform policy test` on
// the output runs what the edge runs. TCP and TLS edges likewise, in on_tcp_connect.
import { MODULE_ACTIONS } from '../../provider/catalog/validate/policy/actions/modules.js';
import { parseTrafficPolicy, type PolicyIssue, type PolicyRule, type TrafficPolicy } from '../../provider/catalog/validate/traffic-policy.js';
import { MODULE_ORDER, type ModuleName } from '../ingress/modules/order.js';

type Doc = Record<string, any>;

const enabled = (m: unknown): m is Doc => !!m && typeof m === 'object' && (m as Doc).enabled !== false;

/** The rule name a module's rule carries (traces and `policy show` name the module by it). */
export const moduleRuleName = (name: string) => `${name} module`;

/** The module's settings as its action's config: as stored, without `enabled` (a disabled module has no rule). */
function actionConfig(config: Doc): Doc {
  const { enabled: _e, ...rest } = config;
  return rest;
}

export interface RoutePolicy {
  policy: TrafficPolicy;
  /** The route's traffic_policy rules in on_http_request: [first, end) of the phase's rules. */
  policyRules: [number, number];
  /** The modules that have a rule, in order. */
  modules: ModuleName[];
}

/**
 * The route's chain as a policy, or the problems of its traffic_policy (a route whose policy
 * does not parse cannot be served: the ingress refuses it).
 */
export function routePolicy(route: Doc): RoutePolicy | { problems: PolicyIssue[] } {
  const request: PolicyRule[] = [];
  let response: PolicyRule[] = [];
  let policyRules: [number, number] = [0, 0];
  const modules: ModuleName[] = [];
  for (const { name } of MODULE_ORDER) {
    const config = route[name];
    if (!enabled(config)) continue;
    modules.push(name);
    if (name === 'traffic_policy') {
      const parsed = parseTrafficPolicy(String(config.value ?? ''), { phases: ['on_http_request', 'on_http_response'] });
      if (!parsed.ok) return { problems: parsed.issues };
      const own = parsed.policy.on_http_request ?? [];
      policyRules = [request.length, request.length + own.length];
      request.push(...own);
      response = parsed.policy.on_http_response ?? [];
      continue;
    }
    const type = MODULE_ACTIONS[name as keyof typeof MODULE_ACTIONS];
    request.push({ name: moduleRuleName(name), expressions: [], actions: [{ type, config: actionConfig(config) }] });
  }
  const policy: TrafficPolicy = {};
  if (request.length) policy.on_http_request = request;
  if (response.length) policy.on_http_response = response;
  return { policy, policyRules, modules };
}

/** A TCP or TLS edge's connection chain as a policy: its ip_restriction, then its traffic_policy's on_tcp_connect rules. */
export function streamPolicy(edge: Doc): { policy: TrafficPolicy } | { problems: PolicyIssue[] } {
  const rules: PolicyRule[] = [];
  if (enabled(edge.ip_restriction)) rules.push({ name: moduleRuleName('ip_restriction'), expressions: [], actions: [{ type: MODULE_ACTIONS.ip_restriction, config: actionConfig(edge.ip_restriction) }] });
  if (enabled(edge.traffic_policy)) {
    const parsed = parseTrafficPolicy(String(edge.traffic_policy.value ?? ''), { phases: ['on_tcp_connect'] });
    if (!parsed.ok) return { problems: parsed.issues };
    rules.push(...(parsed.policy.on_tcp_connect ?? []));
  }
  return { policy: rules.length ? { on_tcp_connect: rules } : {} };
}

/** Whether a route has any enabled module (a route with none is served with no chain at all). */
export const hasModules = (route: Doc) => MODULE_ORDER.some(({ name }) => enabled(route[name]));
