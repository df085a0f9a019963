// The end of an HTTPS route's chain: the route's backend answers. http_response answers at the
// edge; a tunnel group relays through an agent; the weighted choice happens in resolve.ts.
import type { Duplex } from 'node:stream';
import { edgeError, prepareAnswer, type HttpExchange } from '../http/exchange.js';
import type { EdgeAnswer, Exchange, FullDoc } from '../types.js';
import { relayHttp, relayTcp } from './relay.js';
import { resolveBackend } from './resolve.js';

const routeBackendId = (ex: Exchange): string | undefined => {
  const m = ex.route.backend;
  return m && m.enabled !== false ? m.backend_id : undefined;
};

/** An http_response backend's answer, made once per backend document (a table change makes new documents). */
const answers = new WeakMap<FullDoc, EdgeAnswer>();
function answerOf(b: FullDoc): EdgeAnswer {
  let a = answers.get(b);
  if (!a) {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries((b.headers ?? {}) as Record<string, string>)) headers[k.toLowerCase()] = v;
    a = prepareAnswer({ status: b.status_code, headers, body: String(b.body ?? '') });
    answers.set(b, a);
  }
  return a;
}

/**
 * A relay slot of the client's address (client-relays.ts), given back when the response (or
 * the upgraded connection) closes: refused with 429 past the limit, before any agent is asked.
 */
export function holdRelay(ex: HttpExchange): void {
  const relays = ex.deps.relays;
  if (!relays) return;
  const release = relays.take(ex.clientIp);
  if (!release) {
    throw edgeError('ERR_SERVICE_846', `this client address already has ${relays.max} requests in flight through agents; retry when some have finished`, false, { 'retry-after': '1' });
  }
  ((ex.upgrade?.socket ?? ex.res) as NodeJS.EventEmitter).once('close', release);
}

/**
 * The route's backend answers: undefined when it has (http_response, or an error at the edge),
 * a promise while an upstream is asked. An EdgeError may be thrown before either.
 */
export function serveBackendNow(ex: HttpExchange): Promise<void> | undefined {
  const chosen = resolveBackend(ex.table, routeBackendId(ex), ex.deps);
  if (chosen.type === 'error') return void ex.fail(chosen.answer);
  if (chosen.type === 'response') return void ex.answer(answerOf(chosen.backend));
  holdRelay(ex);
  return relayHttp(ex, chosen.tunnelId);
}

export async function serveBackend(ex: HttpExchange): Promise<void> {
  await serveBackendNow(ex);
}

export async function connectBackend(ex: HttpExchange): Promise<Duplex> {
  const chosen = resolveBackend(ex.table, routeBackendId(ex), ex.deps);
  if (chosen.type === 'error') throw edgeError(chosen.code, chosen.message, true);
  if (chosen.type === 'response') throw edgeError('ERR_SERVICE_750', `the backend ${chosen.backend.id} answers HTTP only; a WebSocket or TCP stream needs a tunnel-group backend`, true);
  holdRelay(ex);
  return relayTcp(ex, chosen.tunnelId);
}
