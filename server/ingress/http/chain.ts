// An HTTPS route's chain: its modules and its traffic policy as one policy (server/policy/route.ts:
// each module a rule of its `module-*` action, in MODULE_ORDER, the policy's own rules at
// traffic_policy's place), compiled once per table version and run by the policy engine. Each
// module action runs the module's own filter (modules/index.ts) on the exchange, so a module
// behaves as it always has; the engine only sequences them. A route with no module has no
// chain at all: its requests go straight to the backend.
import { compilePolicy, evaluate, isCompiled, type CompiledPolicy, type Mutations, type PolicyInput } from '../../policy/index.js';
import { recordUpstream, type ActionRun, type Runner } from '../../policy/actions/run.js';
import { hasModules, routePolicy } from '../../policy/route.js';
import { MODULE_ACTIONS } from '../../../provider/catalog/validate/policy/actions/modules.js';
import { FILTERS } from '../modules/index.js';
import { MODULE_ORDER } from '../modules/order.js';
import { applyRequest, applyResponse, connectionInput, ended, PHASES, readsBody, requestInput, settled } from '../modules/traffic-policy.js';
import { WEBHOOK_BODY_LIMIT } from '../modules/webhook-verification.js';
import type { EdgeAnswer, Exchange, FullDoc, HttpFilter, IngressDeps } from '../types.js';
import { errorAnswer } from './error-page.js';
import { EdgeError, type HttpExchange } from './exchange.js';

const MODULE_NAMES = new Map(Object.entries(MODULE_ACTIONS).map(([name, type]) => [type as string, name as keyof typeof FILTERS]));

/** What the engine gives a module action at the ingress: the exchange, and the request's bookkeeping. */
interface RouteHost {
  ex: Exchange;
  input: PolicyInput;
  /** Resolves (or rejects, with the backend's fault) once the backend has answered: a module's code after next() runs then. */
  after: Promise<void>;
  /** The modules' handle() promises: awaited after the backend, before on_http_response (the circuit breaker records there). */
  wrapping: Promise<unknown>[];
  /** A module's fault (not an edge answer): thrown from the chain, as a filter's was. */
  fault?: { error: unknown };
}

/**
 * The changes the engine's actions have made so far, applied to the exchange and cleared, so
 * that a module running next sees them and its own edits come after (as the chain of filters
 * applied them: the policy's before request_headers', so request_headers wins).
 */
function flush(ex: Exchange, m: Mutations) {
  applyRequest(ex, m.request);
  applyResponse(ex, m.response);
  m.request.set_headers = {};
  m.request.remove_headers = [];
  delete m.request.url;
  delete m.request.body;
  m.response = { set_headers: {}, remove_headers: [] };
}

/** A module action at the ingress: the module's filter on the exchange; decided at once when the filter decides at once. */
function moduleRunner(type: string, filter: HttpFilter): Runner {
  return (ctx) => {
    const host = ctx.host as RouteHost;
    const ex = host.ex;
    flush(ex, ctx.mutations);
    let passed = false;
    let onPass: (() => void) | undefined;
    const done = filter.handle(ex, () => {
      passed = true;
      onPass?.();
      return host.after;
    });
    host.wrapping.push(done.catch(() => {}));
    if (passed) return { did: `${type}: passed` };
    if (ex.answered) return { ended: 'answered', did: `${type}: answered ${(ex as HttpExchange).responseStatus}` };
    const pending = new Promise<Omit<ActionRun, 'pending'>>((resolve) => {
      onPass = () => resolve({ did: `${type}: passed` });
      done.then(
        () => { if (!passed) resolve({ ended: 'answered', did: `${type}: answered ${(ex as HttpExchange).responseStatus ?? '(the connection was taken)'}` }); },
        (e) => {
          if (passed) return;
          if (e instanceof EdgeError) {
            if (e.upstreamFailed) (ex as HttpExchange).fail(e.answerWith);
            else ex.answer(e.answerWith);
          } else host.fault = { error: e };
          resolve({ ended: 'answered', did: `${type}: answered ${(ex as HttpExchange).responseStatus ?? 'with a fault'}` });
        },
      );
    });
    return { did: `${type}: running`, pending };
  };
}

/** Reads the request body (bounded) where the policy's rules begin, when one of its actions reads it. */
const readBodyFilter: HttpFilter = {
  async handle(ex, next) {
    const input = ex.locals.policyInput as PolicyInput;
    input.req!.body = await ex.readBody(WEBHOOK_BODY_LIMIT);
    await next();
  },
};

function refuse(deps: IngressDeps, route: FullDoc, name: string, why: string): EdgeAnswer {
  deps.log({ level: 'error', msg: `ingress: the ${name} module of route ${route.id} cannot run: ${why}`, route: route.id });
  return errorAnswer('ERR_SERVICE_749', `the route's ${name} module cannot run on this server; see the server log`);
}

/** The route's chain (one engine filter, or none), or the answer every request gets when it cannot be built. */
export function buildChain(route: FullDoc, deps: IngressDeps, registry = FILTERS): HttpFilter[] | EdgeAnswer {
  if (!hasModules(route)) return [];
  const filters = new Map<string, HttpFilter>();
  let own: CompiledPolicy | undefined;
  for (const { name } of MODULE_ORDER) {
    const config = route[name];
    if (config == null || config.enabled === false) continue;
    const factory = registry[name];
    if (!factory) return errorAnswer('ERR_SERVICE_749', `the route's ${name} module is not supported by this server, so the route is refused rather than served without it`);
    if (name === 'traffic_policy') {
      // Compiled alone to check it (with the words a user sees elsewhere) and to see whether it reads the body; the chain below runs it.
      const p = compilePolicy(String(config.value), { phases: PHASES, scope: route.id, offline: true });
      if (!isCompiled(p)) return refuse(deps, route, name, `the policy does not compile: ${p.problems.map((x) => x.message).join('; ')}`);
      own = p;
      continue;
    }
    try {
      const { enabled: _e, ...settings } = config;
      filters.set(`${MODULE_ACTIONS[name as keyof typeof MODULE_ACTIONS]} ${JSON.stringify(settings)}`, factory(config, route, deps));
    } catch (e) {
      return refuse(deps, route, name, (e as Error).message);
    }
  }
  const shape = routePolicy(route);
  if ('problems' in shape) return refuse(deps, route, 'traffic_policy', shape.problems.map((x) => x.message).join('; '));
  const policy = compilePolicy(JSON.stringify(shape.policy), {
    phases: PHASES,
    scope: route.id,
    moduleRunner: (type, config) => {
      // The route's modules' filters, built above; a module action in the route's own policy gets one of its own.
      let filter = filters.get(`${type} ${JSON.stringify(config)}`);
      const name = MODULE_NAMES.get(type);
      if (!filter && name && registry[name]) filter = registry[name]!(config as FullDoc[string], route, deps);
      return filter && moduleRunner(type, filter);
    },
  });
  if (!isCompiled(policy)) return refuse(deps, route, 'traffic_policy', policy.problems.map((x) => x.message).join('; '));
  const [first, end] = shape.policyRules;
  if (own && readsBody(own)) {
    policy.phases.on_http_request!.splice(first, 0, { index: -1, name: 'read the request body', expressions: [], actions: [{ type: 'read-body', run: moduleRunner('read-body', readBodyFilter), templates: new Map() }] });
  }
  return [routeEngine(policy, route, deps, own !== undefined, end, !!own && readsBody(own))];
}

/** The one filter of a route with modules: the engine's on_http_request, the backend, on_http_response. */
function routeEngine(policy: CompiledPolicy, route: FullDoc, deps: IngressDeps, hasPolicy: boolean, policyEnd: number, readBody: boolean): HttpFilter {
  const onResponse = !!policy.phases.on_http_response?.length;
  const log = (m: Mutations) => {
    for (const metadata of m.logs ?? []) deps.log({ level: 'info', msg: 'traffic policy log action', route: route.id, metadata });
  };
  return {
    async handle(ex, next) {
      let release!: () => void;
      let fail!: (e: unknown) => void;
      const after = new Promise<void>((resolve, reject) => { release = resolve; fail = reject; });
      after.catch(() => {});
      // The modules' own code reads the exchange; only a policy's expressions read these (lazily), so a route without one skips the copying.
      const conn = hasPolicy ? connectionInput(ex) : { client_ip: ex.clientIp, server_port: ex.publicPort };
      const input: PolicyInput = hasPolicy ? { now: deps.now(), conn, endpoint: { id: route.id }, req: requestInput(ex) } : { now: deps.now(), conn };
      if (readBody) ex.locals.policyInput = input;
      const host: RouteHost = { ex, input, after, wrapping: [] };
      const r = await settled(evaluate(policy, 'on_http_request', input, deps.policyState, host));
      const settle = async () => {
        release();
        await Promise.all(host.wrapping);
      };
      if (host.fault) {
        await settle();
        throw host.fault.error;
      }
      log(r.mutations);
      if (r.outcome !== 'continue') {
        // A module after the policy's rules answered (a sign-in redirect, a webhook's 403, the
        // breaker's 503): as the policy's code after next() did, its breakers hear of it and
        // on_http_response sees that answer. Any other ending is final.
        const last = r.rules[r.rules.length - 1];
        const afterPolicy = r.outcome === 'answered' && hasPolicy && last !== undefined && last.index >= policyEnd;
        if (r.outcome !== 'answered') await ended(ex, r, deps);
        await settle();
        if (!afterPolicy) return;
      } else {
        flush(ex, r.mutations);
        try {
          await next();
        } catch (e) {
          fail(e);
          await Promise.all(host.wrapping);
          recordUpstream(r.mutations, deps.now(), ex.outcome ?? 'error');
          throw e;
        }
        await settle();
      }
      recordUpstream(r.mutations, deps.now(), ex.outcome ?? 'error');
      const head = ex.responseHead;
      if (!onResponse || !head || ex.outcome === 'error') return;
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(head.headers)) if (v !== undefined) headers[k] = v;
      const res = await settled(evaluate(policy, 'on_http_response', { now: deps.now(), conn, endpoint: { id: route.id }, req: requestInput(ex), res: { status_code: head.status, headers }, actions: r.actions, vars: r.vars }, deps.policyState));
      log(res.mutations);
      if (await ended(ex, res, deps)) return;
      applyResponse(ex, res.mutations.response);
    },
  };
}

/**
 * Runs the filters in order, then `terminal`, stopping where one answers. An EdgeError thrown
 * below a filter becomes the exchange's answer before that filter's code after next() runs,
 * so it sees the outcome (the circuit breaker counts upstream failures this way).
 */
export function runChain(filters: readonly HttpFilter[], ex: HttpExchange, terminal: (ex: Exchange) => Promise<void>): Promise<void> {
  return step(filters, 0, ex, terminal);
}

function caught(ex: HttpExchange, e: unknown) {
  if (!(e instanceof EdgeError)) throw e;
  if (e.upstreamFailed) ex.fail(e.answerWith);
  else ex.answer(e.answerWith);
}

function step(filters: readonly HttpFilter[], i: number, ex: HttpExchange, terminal: (ex: Exchange) => Promise<void>): Promise<void> {
  if (ex.answered) return Promise.resolve();
  if (i === filters.length) return terminal(ex).catch((e) => caught(ex, e));
  let called = false;
  return filters[i].handle(ex, () => {
    if (called) return Promise.resolve();
    called = true;
    return step(filters, i + 1, ex, terminal);
  }).catch((e) => caught(ex, e));
}
