// The end of an HTTPS route's chain: the route's backend answers. http_response answers at the
// edge; a tunnel group relays through an agent; the weighted choice happens in resolve.ts.
import type { Duplex } from 'node:stream';
import { backendError, EdgeError, edgeError, prepareAnswer, type HttpExchange } from '../http/exchange.js';
import type { EdgeAnswer, Exchange, FullDoc } from '../types.js';
import { relayHttp, relayTcp } from './relay.js';
import { resolveBackend } from './resolve.js';
import { pickTunnel } from './tunnel-group.js';

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
  return relayHttp(ex, chosen.tunnelId).catch((e) => relayElsewhere(ex, chosen.backend, chosen.tunnelId, e));
}

/** Methods whose request may be sent twice (RFC 9110 9.2.2): only these go to another tunnel after reaching a dying one. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/**
 * The tunnel's agent went away under the request (killed a moment ago, its connection still
 * closing): the request goes to the next matching tunnel that is online, instead of a 502.
 * Only when it can be sent again as it was: its body, if any, read whole by the edge, and
 * either nothing reached the agent (the tunnel was gone when the stream was to be opened) or
 * the method is idempotent. Each tunnel is tried once.
 */
async function relayElsewhere(ex: HttpExchange, backend: FullDoc, failed: string, error: unknown): Promise<void> {
  const gateway = ex.deps.gateway;
  const tried = new Set([failed]);
  let e = error;
  for (;;) {
    const last = [...tried].at(-1)!;
    const notSent = e instanceof EdgeError && e.answerWith.code === 'ERR_SERVICE_742';
    const resendable = (ex.body !== undefined || bodylessRequest(ex)) && (notSent || IDEMPOTENT.has(ex.method));
    if (!(e instanceof EdgeError) || !e.upstreamFailed || ex.res.headersSent || !resendable || gateway.tunnelLive(last)) throw e;
    const next = pickTunnel(backend, gateway.labeledTunnels(), (id) => tried.has(id) || !gateway.tunnelLive(id), gateway.preferred?.());
    if (!next) throw e;
    tried.add(next);
    try {
      return await relayHttp(ex, next);
    } catch (again) {
      e = again;
    }
  }
}

/** No body: HTTP/1.1 without Content-Length (or 0) and Transfer-Encoding, or an HTTP/2 stream that ended with its headers. */
function bodylessRequest(ex: HttpExchange): boolean {
  const h2 = (ex.req as { stream?: { endAfterHeaders?: boolean } }).stream;
  if (h2 && typeof h2.endAfterHeaders === 'boolean') return h2.endAfterHeaders;
  const length = ex.req.headers['content-length'];
  return ex.req.headers['transfer-encoding'] === undefined && (length === undefined || Number(length) === 0);
}

export async function serveBackend(ex: HttpExchange): Promise<void> {
  await serveBackendNow(ex);
}

export async function connectBackend(ex: HttpExchange): Promise<Duplex> {
  const chosen = resolveBackend(ex.table, routeBackendId(ex), ex.deps);
  if (chosen.type === 'error') throw new EdgeError(chosen.answer, true);
  if (chosen.type === 'response') throw backendError('ERR_SERVICE_750', `the backend ${chosen.backend.id} answers HTTP only; a WebSocket or TCP stream needs a tunnel-group backend`);
  holdRelay(ex);
  return relayTcp(ex, chosen.tunnelId);
}
