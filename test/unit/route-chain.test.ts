// The route's chain as one policy on the engine (server/ingress/http/chain.ts): the module
// actions run the modules' own code in MODULE_ORDER, interleaved with the policy's rules, and
// the edits of what goes upstream land in that order, as the chain of filters applied them.
import { describe, expect, it } from 'vitest';
import { buildChain } from '../../server/ingress/http/chain.js';
import { compilePolicy, isCompiled } from '../../server/policy/index.js';
import type { EdgeAnswer, HttpFilter } from '../../server/ingress/types.js';
import { fakeDeps, fakeExchange } from '../helpers/fake-exchange.js';

const POLICY = `on_http_request:
  - actions:
      - type: add-headers
        config: {headers: {x-both: policy, x-removed: policy}}
      - type: remove-headers
        config: {headers: [x-readded]}
`;

async function through(chain: HttpFilter[] | EdgeAnswer, headers: Record<string, string> = {}) {
  expect(Array.isArray(chain)).toBe(true);
  const f = fakeExchange({ method: 'GET', url: '/', headers });
  let reached = false;
  for (const filter of chain as HttpFilter[]) await filter.handle(f.ex, async () => { reached = true; });
  return { reached, upstream: f.ex.upstreamHeaders, answer: f.answer() };
}

describe('a route chain on the policy engine', () => {
  it('a route with no module has no chain: its requests go straight to the backend', () => {
    expect(buildChain({ id: 'rt_plain' }, fakeDeps())).toEqual([]);
    expect(buildChain({ id: 'rt_off', request_headers: { enabled: false, add: { a: 'b' } } }, fakeDeps())).toEqual([]);
  });

  it("request_headers edits after the policy's header actions, so its additions and removals win", async () => {
    const chain = buildChain({ id: 'rt_h', traffic_policy: { value: POLICY }, request_headers: { add: { 'x-both': 'module', 'x-readded': 'module' }, remove: ['x-removed'] } }, fakeDeps());
    const r = await through(chain, { 'x-readded': 'client' });
    expect(r.reached).toBe(true);
    expect(r.upstream['x-both']).toBe('module');
    expect(r.upstream['x-removed']).toBeUndefined();
    expect(r.upstream['x-readded']).toBe('module');
  });

  it('a module before the policy answers before any of its rules run', async () => {
    const logs: Record<string, unknown>[] = [];
    const chain = buildChain({ id: 'rt_ua', user_agent_filter: { deny: ['(?i)bot'] }, traffic_policy: { value: 'on_http_request: [{actions: [{type: log, config: {metadata: {ran: true}}}]}]' } }, fakeDeps(Date.now(), logs));
    const r = await through(chain, { 'user-agent': 'somebot' });
    expect(r.reached).toBe(false);
    expect(r.answer?.code).toBe('ERR_SERVICE_781');
    expect(logs.filter((l) => l.msg === 'traffic policy log action')).toEqual([]);
  });

  it('a policy that does not compile refuses the route with 502 ERR_SERVICE_749, never serves it without its modules', () => {
    const logs: Record<string, unknown>[] = [];
    const chain = buildChain({ id: 'rt_bad', ip_restriction: { ip_policy_ids: [] }, traffic_policy: { value: 'on_http_request: [{expressions: ["req.nope"], actions: [{type: deny}]}]' } }, fakeDeps(Date.now(), logs));
    expect((chain as EdgeAnswer).code).toBe('ERR_SERVICE_749');
    expect(String(logs[0]?.msg)).toContain('the traffic_policy module of route rt_bad cannot run: the policy does not compile');
  });

  it("a module action in the route's own policy runs that module's code; where no route module can run, the policy is refused, never run without it", async () => {
    const own = `on_http_request:
  - expressions: ["req.url.path.startsWith('/bots-out')"]
    actions: [{type: module-user-agent-filter, config: {deny: ["(?i)bot"]}}]
`;
    const chain = buildChain({ id: 'rt_own', traffic_policy: { value: own } }, fakeDeps());
    const f = fakeExchange({ method: 'GET', url: '/bots-out/x', headers: { 'user-agent': 'AnyBot' } });
    let reached = false;
    await (chain as HttpFilter[])[0].handle(f.ex, async () => { reached = true; });
    expect(reached).toBe(false);
    expect(f.answer()?.code).toBe('ERR_SERVICE_781');
    // Elsewhere (a cloud endpoint's policy) there is no route module to run: refused when compiled.
    const elsewhere = compilePolicy('on_http_request: [{actions: [{type: module-oauth, config: {provider: {github: {}}}}]}]');
    expect(isCompiled(elsewhere)).toBe(false);
    expect(JSON.stringify(elsewhere)).toContain("module-oauth runs a route module's code");
    expect(isCompiled(compilePolicy('on_http_request: [{actions: [{type: module-oauth, config: {provider: {github: {}}}}]}]', { offline: true }))).toBe(true);
  });
});
