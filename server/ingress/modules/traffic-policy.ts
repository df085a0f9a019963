// traffic_policy: the route's policy through the engine (server/policy). on_http_request runs
// before the backend (its header changes and URL rewrite go upstream, an ending action
// answers at the edge: a rate limit's 429 with retry-after); on_http_response sees the
// answer the client would get and may change or replace it. Buckets are scoped by route id.
import { compilePolicy, evaluate, isCompiled, type Mutations, type PolicyResult } from '../../policy/index.js';
import type { TLSSocket } from 'node:tls';
import { forwardInternal } from '../cloud-endpoints.js';
import type { Exchange, FilterFactory } from '../types.js';

const PHASES = ['on_http_request', 'on_http_response'] as const;

function requestInput(ex: Exchange) {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(ex.req.headers)) if (v !== undefined && !k.startsWith(':')) headers[k] = v;
  const port = ex.publicPort === 443 ? '' : `:${ex.publicPort}`;
  return { method: ex.method, url: `${ex.scheme}://${ex.host}${port}${ex.path}`, headers };
}

/** `1.3` for a TLSv1.3 connection; undefined without TLS. */
function tlsVersion(ex: Exchange): string | undefined {
  const socket = ex.req.socket as Partial<TLSSocket> | undefined;
  const p = socket?.getProtocol?.();
  return p ? p.replace(/^TLSv/, '') : undefined;
}

function applyRequest(ex: Exchange, m: Mutations['request']) {
  for (const name of m.remove_headers) delete ex.upstreamHeaders[name.toLowerCase()];
  for (const [name, value] of Object.entries(m.set_headers)) ex.upstreamHeaders[name.toLowerCase()] = value;
  if (m.url) {
    try {
      const u = new URL(m.url);
      ex.path = u.pathname + u.search;
    } catch { /* the engine only leaves URLs it could parse */ }
  }
}

function applyResponse(ex: Exchange, m: Mutations['response']) {
  if (!m.remove_headers.length && !Object.keys(m.set_headers).length) return;
  ex.onResponseHead((head) => {
    for (const name of m.remove_headers) delete head.headers[name.toLowerCase()];
    for (const [name, value] of Object.entries(m.set_headers)) head.headers[name.toLowerCase()] = value;
  });
}

function ended(ex: Exchange, r: PolicyResult): boolean {
  if (r.outcome === 'continue') return false;
  // 'close' is what ending actions do on TCP; an HTTP phase never gets it, but refuse if it did.
  if (r.outcome === 'close') ex.answer({ status: 403, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: 'Forbidden\n' });
  else ex.answer({ status: r.outcome.response.status, headers: r.outcome.response.headers, body: r.outcome.response.body });
  return true;
}

export const trafficPolicy: FilterFactory = (config, route, deps) => {
  const policy = compilePolicy(String(config.value), { phases: PHASES, scope: route.id });
  if (!isCompiled(policy)) throw new Error(`the policy does not compile: ${policy.problems.map((p) => p.message).join('; ')}`);
  const onRequest = !!policy.phases.on_http_request?.length;
  const onResponse = !!policy.phases.on_http_response?.length;
  return {
    async handle(ex, next) {
      const conn = { client_ip: ex.clientIp, server_port: ex.publicPort, tls_version: tlsVersion(ex) };
      let actions: PolicyResult['actions'] | undefined;
      if (onRequest) {
        const r = evaluate(policy, 'on_http_request', { now: deps.now(), conn, req: requestInput(ex) }, deps.policyState);
        actions = r.actions;
        // forward-internal: the internal endpoint's policy answers instead (cloud-endpoints.ts).
        const forward = typeof r.outcome === 'object' ? r.outcome.response.forward_internal : undefined;
        if (forward) return forwardInternal(ex, forward, deps);
        if (ended(ex, r)) return;
        applyRequest(ex, r.mutations.request);
        applyResponse(ex, r.mutations.response);
      }
      await next();
      const head = ex.responseHead;
      if (!onResponse || !head || ex.outcome === 'error') return;
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(head.headers)) if (v !== undefined) headers[k] = v;
      const r = evaluate(policy, 'on_http_response', { now: deps.now(), conn, req: requestInput(ex), res: { status_code: head.status, headers }, actions }, deps.policyState);
      if (ended(ex, r)) return;
      applyResponse(ex, r.mutations.response);
    },
  };
};
