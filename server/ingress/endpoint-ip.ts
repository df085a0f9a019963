// The IP restriction of an agent's TCP or TLS endpoint (the SDK's allowCidr/denyCidr on a tcp or
// tls listener; gateway/v2/bind.ts): checked once per connection, before it reaches the agent, as
// a TCP or TLS edge checks its own (tcp.ts). HTTP endpoints run it as a route module instead.
import { inlineRules, ipAllowed } from './modules/ip-restriction.js';
import type { IpRuleSet } from './ip-rules.js';
import type { FullDoc, IngressDeps, IngressTable } from './types.js';

/** An endpoint's rules are inline (bind.ts never names stored IP policies): no table is consulted. */
const NO_POLICIES = { ipPolicies: new Map() } as unknown as IngressTable;
const compiled = new WeakMap<FullDoc, IpRuleSet | undefined>();

/** Whether a connection from `ip` may reach the endpoint's tunnel. */
export function endpointAllows(deps: IngressDeps, tunnelId: string, ip: string): boolean {
  const route = deps.gateway.endpointRoute(tunnelId);
  const m = route?.ip_restriction;
  if (!m || m.enabled === false) return true;
  if (!compiled.has(route)) compiled.set(route, inlineRules(m));
  return ipAllowed(NO_POLICIES, [], ip, compiled.get(route));
}
