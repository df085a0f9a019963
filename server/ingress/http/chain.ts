// An HTTPS route's filters, built once per table version from MODULE_ORDER and the registry,
// and the runner that threads an exchange through them to the backend.
import { FILTERS } from '../modules/index.js';
import { MODULE_ORDER } from '../modules/order.js';
import type { EdgeAnswer, Exchange, FullDoc, HttpFilter, IngressDeps } from '../types.js';
import { errorAnswer } from './error-page.js';
import { EdgeError, type HttpExchange } from './exchange.js';

/** The route's filters in MODULE_ORDER, or the answer every request gets when one cannot be built. */
export function buildChain(route: FullDoc, deps: IngressDeps, registry = FILTERS): HttpFilter[] | EdgeAnswer {
  const filters: HttpFilter[] = [];
  for (const { name } of MODULE_ORDER) {
    const config = route[name];
    if (config == null || config.enabled === false) continue;
    const factory = registry[name];
    if (!factory) return errorAnswer('ERR_SERVICE_749', `the route's ${name} module is not supported by this server, so the route is refused rather than served without it`);
    try {
      filters.push(factory(config, route, deps));
    } catch (e) {
      deps.log({ level: 'error', msg: `ingress: the ${name} module of route ${route.id} cannot run: ${(e as Error).message}`, route: route.id });
      return errorAnswer('ERR_SERVICE_749', `the route's ${name} module cannot run on this server; see the server log`);
    }
  }
  return filters;
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
