// circuit_breaker: wraps the upstream call (MODULE_ORDER puts it after every refusal, so a
// refusal is never an upstream error). An upstream failure (refused, timed out, no tunnel)
// or a 5xx answer counts as an error; while tripped the route answers 503 with retry-after.
// State lives per ingress server (with --workers, in the primary for every worker) and route, and survives reloads of the table while the
// module's settings are unchanged.
import { edgeError } from '../http/exchange.js';
import type { FilterFactory, IngressDeps } from '../types.js';
import { breakerConfig, CircuitBreaker } from './circuit-state.js';

/** Per ingress server, per route: the breaker of the route's current settings (an edit replaces it). */
type Breaker = Pick<CircuitBreaker, 'allow' | 'retryAfter' | 'record'>;
const breakers = new WeakMap<IngressDeps, Map<string, { settings: string; breaker: Breaker }>>();

function breakerFor(deps: IngressDeps, routeId: string, settings: string, make: () => Breaker) {
  let byRoute = breakers.get(deps);
  if (!byRoute) breakers.set(deps, (byRoute = new Map()));
  let held = byRoute.get(routeId);
  if (!held || held.settings !== settings) byRoute.set(routeId, (held = { settings, breaker: make() }));
  return held.breaker;
}

export const circuitBreaker: FilterFactory = (config, route, deps) => {
  const cfg = breakerConfig(config);
  const settings = JSON.stringify(cfg);
  // An ingress worker's breakers are the primary's (`--workers`, server/cluster/): one per route for the server.
  const breaker = breakerFor(deps, route.id, settings, () => deps.makeBreaker?.(`${route.id}\u0000${settings}`, cfg) ?? new CircuitBreaker(cfg));
  return {
    async handle(ex, next) {
      const now = deps.now();
      if (!breaker.allow(now)) {
        const wait = breaker.retryAfter(now);
        throw edgeError('ERR_SERVICE_747', `the upstream of this route failed too often; the edge stops sending it requests for ${wait} s`, false, { 'retry-after': String(wait) });
      }
      let error = true;
      try {
        await next();
        const outcome = ex.outcome;
        error = outcome === 'error' || (typeof outcome === 'number' && outcome >= 500);
      } finally {
        breaker.record(deps.now(), error);
      }
    },
  };
};
