// The runners of the `module-*` actions (a route module as an action; the config check is in
// provider/catalog/validate/policy/actions/modules.ts). Where a server runs the engine for an
// edge (the ingress), it gives each module's own code as the runner (MakeContext.moduleRunner),
// so the module behaves exactly as it always has. Without one (`edgeform policy test`), the
// module's code runs against the test's request where it can be (ip_restriction,
// user_agent_filter, basic_auth, webhook_verification: their own filters on a stand-in
// exchange; the header edits, compression and the circuit breaker by the same functions), and
// the sign-in modules and the WebSocket converter, which need a browser or a socket, say so and
// let the request go on.
import { MODULE_ACTIONS } from '../../../provider/catalog/validate/policy/actions/modules.js';
import { basicAuth } from '../../ingress/modules/basic-auth.js';
import { breakerConfig } from '../../ingress/modules/circuit-state.js';
import { chooseEncoding } from '../../ingress/modules/compression.js';
import { headerEdits } from '../../ingress/modules/header-edits.js';
import { ipRestriction } from '../../ingress/modules/ip-restriction.js';
import { IpRuleSet } from '../../ingress/ip-rules.js';
import { userAgentFilter } from '../../ingress/modules/user-agent-filter.js';
import { webhookVerification } from '../../ingress/modules/webhook-verification.js';
import { errorAnswer } from '../../ingress/http/error-page.js';
import { EdgeError } from '../../ingress/http/exchange.js';
import type { EdgeAnswer, FilterFactory, HttpFilter } from '../../ingress/types.js';
import type { PolicyInput } from '../context.js';
import { headersOf, type ActionRun, type Ended, type RunContext, type Runner, type RunnerFactory } from './run.js';

type Config = Record<string, any>;

const MODULE_OF = new Map<string, string>(Object.entries(MODULE_ACTIONS).map(([m, t]) => [t, m]));

const inputOf = (ctx: RunContext) => (ctx.vars as unknown as { input: PolicyInput }).input;

/** A stand-in exchange for a module's filter, made of the test's request. */
function standIn(ctx: RunContext, config: Config) {
  const input = inputOf(ctx);
  const req = input.req ?? { method: 'GET', url: 'http://localhost/', headers: {} };
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(req.headers ?? {})) headers[k.toLowerCase()] = Array.isArray(v) && v.length === 1 ? v[0] : (v as string | string[]);
  const url = new URL(req.url);
  // ip_restriction's policies: the rules `policy show` wrote beside each id (the ingress reads them live, by id).
  const ipPolicies = new Map<string, IpRuleSet>();
  for (const p of (config.ip_policies ?? []) as { id: string; rules?: { cidr: string; action: 'allow' | 'deny' }[] }[]) {
    ipPolicies.set(p.id, IpRuleSet.of((p.rules ?? []).map((r, i) => ({ id: `${p.id}:${i}`, cidr: r.cidr, action: r.action }))));
  }
  const state: { answer?: EdgeAnswer } = {};
  const ex = {
    req: { headers, url: url.pathname + url.search, httpVersion: req.version ?? '1.1', socket: {} },
    method: req.method,
    path: url.pathname + url.search,
    host: url.host,
    scheme: url.protocol.replace(':', ''),
    publicPort: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
    clientIp: input.conn.client_ip,
    table: { ipPolicies },
    upstreamHeaders: {},
    readBody: () => Promise.resolve(req.body === undefined ? Buffer.alloc(0) : Buffer.from(req.body)),
    answer: (a: EdgeAnswer) => { state.answer = a; },
    onResponseHead() {},
    onResponseBody() {},
  };
  return { ex, state };
}

const ended = (a: EdgeAnswer): Ended => ({ response: { status: a.status, headers: { ...(a.headers ?? {}), ...(a.code ? { 'edgeform-error-code': a.code } : {}) }, body: String(a.body ?? '') } });

/** Runs a module's filter on the stand-in: sync when it decides at once, else pending. */
function offlineFilter(type: string, config: Config, factory: FilterFactory): Runner {
  const filter: HttpFilter = factory(config, { id: 'policy-test' } as never, { log: () => {}, now: () => Date.now() } as never);
  return (ctx) => {
    const { ex, state } = standIn(ctx, config);
    let passed = false;
    const done = filter.handle(ex as never, () => { passed = true; return Promise.resolve(); });
    const verdict = (): Omit<ActionRun, 'pending'> => {
      if (passed) return { did: `${type}: lets the request through` };
      const a = state.answer!;
      return { ended: ended(a), did: `${type}: ${a.status} ${a.code ?? ''}`.trim() };
    };
    if (passed || state.answer) {
      done.catch(() => {});
      return verdict();
    }
    const pending = done.then(verdict, (e): Omit<ActionRun, 'pending'> => {
      if (e instanceof EdgeError) return { ended: ended(e.answerWith), did: `${type}: ${e.answerWith.status} ${e.answerWith.code ?? ''}`.trim() };
      throw e;
    });
    return { did: `${type}: checking`, pending };
  };
}

function headerEditsRunner(type: string, config: Config, phase: 'request' | 'response'): Runner {
  const edits = headerEdits(config);
  return (ctx) => {
    const changes = phase === 'request' ? ctx.mutations.request : ctx.mutations.response;
    const lists = phase === 'request' ? headersOf(ctx).lists : undefined;
    for (const name of edits.remove) {
      if (lists) delete lists[name];
      delete changes.set_headers[name];
      if (!changes.remove_headers.includes(name)) changes.remove_headers.push(name);
    }
    for (const [name, value] of edits.add) {
      if (lists) lists[name] = [value];
      changes.set_headers[name] = value;
      changes.remove_headers = changes.remove_headers.filter((h) => h !== name);
    }
    return { did: `${type}: ${[...edits.remove.map((n) => `-${n}`), ...edits.add.map(([n, v]) => `${n}: ${v}`)].join(', ') || 'nothing'}` };
  };
}

function offline(type: string, config: Config, scope: string): Runner {
  switch (type) {
    case 'module-ip-restriction': return offlineFilter(type, config, ipRestriction);
    case 'module-user-agent-filter': return offlineFilter(type, config, userAgentFilter);
    case 'module-basic-auth': return offlineFilter(type, config, basicAuth);
    case 'module-webhook-verification': return offlineFilter(type, config, webhookVerification);
    case 'module-request-headers': return headerEditsRunner(type, config, 'request');
    case 'module-response-headers': return headerEditsRunner(type, config, 'response');
    case 'module-compression':
      return (ctx) => {
        const accept = inputOf(ctx).req?.headers?.['accept-encoding'];
        const encoding = chooseEncoding(typeof accept === 'string' || accept === undefined ? accept : accept.join(','));
        if (encoding && !ctx.mutations.response.compress) ctx.mutations.response.compress = encoding;
        return { did: `${type}: ${encoding ?? 'the client accepts neither br nor gzip; unchanged'}` };
      };
    case 'module-circuit-breaker': {
      const cfg = breakerConfig(config);
      const key = `${scope}\u0000module\u0000${JSON.stringify(cfg)}`;
      return (ctx) => {
        const breaker = ctx.state.breaker(key, cfg);
        if (breaker.allow(ctx.now)) {
          (ctx.mutations.request.circuit_breakers ??= []).push(breaker);
          return { did: `${type}: ${breaker.state}; lets the request through` };
        }
        const wait = breaker.retryAfter(ctx.now);
        return { ended: ended(errorAnswer('ERR_SERVICE_747', `the upstream of this route failed too often; the edge stops sending it requests for ${wait} s`, { 'retry-after': String(wait) })), did: `${type}: tripped; 503, retry-after ${wait}s` };
      };
    }
    default:
      // module-oauth, module-oidc, module-saml, module-websocket-tcp-converter.
      return () => ({ did: `${type}: runs at the ingress only (${MODULE_OF.get(type)} needs a browser's sign-in or a WebSocket); policy test lets the request through` });
  }
}

/** The runner factory of every module-* action. */
export const moduleRunnerFactory = (type: string): RunnerFactory => (config: Config, make) => {
  const own = make.moduleRunner?.(type, config);
  if (own) return own;
  if (make.offline) return offline(type, config, make.scope);
  throw new Error(`${type} runs a route module's code, which runs on a route's or an edge's chain (and in edgeform policy test), not here`);
};

export const MODULE_ACTION_TYPES = Object.values(MODULE_ACTIONS);
