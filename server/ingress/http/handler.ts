// The HTTP side of the ingress: the listener (i-core) hands each HTTPS request, and each
// HTTP/1.1 Upgrade, of an edge here. The route is chosen, its filters run in MODULE_ORDER,
// the backend answers, and the answer streams back; one access-log line per request.
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { callbackRoute } from '../auth/callback-route.js';
import { connectBackend, serveBackend } from '../backends/serve.js';
import type { HttpsEdgeEntry, IngressDeps, IngressTable } from '../types.js';
import { runChain } from './chain.js';
import { chainOf, compiledEdge } from './compile-edge.js';
import { errorAnswer } from './error-page.js';
import { HttpExchange } from './exchange.js';
import { upstreamHeadersOf } from './forwarded.js';
import { normalizePath, selectRoute, splitTarget } from './select-route.js';
import { passThroughUpgrade } from './upgrade.js';

/** What the listener knows of a request: the table it started with and the edge its host and port chose. */
export interface HttpsContext {
  table: IngressTable;
  /** Undefined when no edge serves the host on this port: the client gets a 404 page. */
  edge?: HttpsEdgeEntry;
  clientIp: string;
  publicPort: number;
  /** The request's host name, lower case, no port. */
  host: string;
  deps: IngressDeps;
}

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

function pathOf(target: string): { path: string; query: string } {
  if (!target.startsWith('/')) {
    try {
      const u = new URL(target);
      return { path: normalizePath(u.pathname), query: u.search };
    } catch {
      return { path: normalizePath(target), query: '' };
    }
  }
  const { path, query } = splitTarget(target);
  return { path: normalizePath(path), query };
}

/** Builds the exchange for a request of `ctx.edge`, or answers the 404 page and returns undefined. */
function exchangeFor(req: Req, res: Res, ctx: HttpsContext, upgrade?: HttpExchange['upgrade']) {
  const { path, query } = pathOf(req.url ?? '/');
  // HTTP/2's :authority first: it is what the listener checked against the connection's name (a
  // host header beside it, naming another site, must not reach the upstream).
  const hostHeader = String(req.headers[':authority'] ?? req.headers.host ?? ctx.host);
  const base = { req, res, clientIp: ctx.clientIp, host: ctx.host, publicPort: ctx.publicPort, table: ctx.table, deps: ctx.deps, method: req.method ?? 'GET', path: path + query, upgrade, connect: (e: unknown) => connectBackend(e as HttpExchange) };
  const upstreamHeaders = upstreamHeadersOf(req.headers, ctx.clientIp, hostHeader, 'https');
  if (!ctx.edge) {
    const ex = new HttpExchange({ ...base, edge: { id: '' }, route: { id: '' }, upstreamHeaders });
    ex.answer(errorAnswer('ERR_SERVICE_740', `no edge serves ${ctx.host} on port ${ctx.publicPort}`));
    return { ex, filters: [] };
  }
  const compiled = compiledEdge(ctx.edge, ctx.table, ctx.deps);
  const route = callbackRoute(compiled.matchers, path, query) ?? selectRoute(compiled.matchers, ctx.host, path);
  const ex = new HttpExchange({ ...base, edge: ctx.edge.doc, route: route ?? { id: '' }, upstreamHeaders });
  if (!route) {
    ex.answer(errorAnswer('ERR_SERVICE_741', `no route of this edge matches ${ctx.host}${path}`));
    return { ex, filters: [] };
  }
  const chain = chainOf(compiled, route, ctx.deps);
  if (!Array.isArray(chain)) {
    ex.answer(chain);
    return { ex, filters: [] };
  }
  return { ex, filters: chain };
}

function accessLog(ex: HttpExchange, startedAt: number, status: number | undefined, bytes: number) {
  ex.deps.log({
    level: 'info', msg: 'ingress request', edge: ex.edge.id || undefined, route: ex.route.id || undefined,
    method: ex.req.method, host: ex.host, port: ex.publicPort, path: ex.path.split('?')[0], status,
    duration_ms: Math.round((performance.now() - startedAt) * 1000) / 1000, bytes, client_ip: ex.clientIp,
    ...(ex.code ? { code: ex.code } : {}),
  });
}

function internalFault(ex: HttpExchange, e: unknown) {
  ex.deps.log({ level: 'error', msg: `ingress: request failed: ${(e as Error)?.stack ?? e}`, edge: ex.edge.id, route: ex.route.id });
  ex.fail(errorAnswer('ERR_SERVICE_749', 'the edge could not handle this request; the server log has the details'));
}

export async function handleHttpsRequest(req: Req, res: Res, ctx: HttpsContext): Promise<void> {
  const startedAt = performance.now();
  (res as NodeJS.EventEmitter).on('error', () => {});
  const { ex, filters } = exchangeFor(req, res, ctx);
  try {
    await runChain(filters, ex, (e) => serveBackend(e as HttpExchange));
  } catch (e) {
    internalFault(ex, e);
  }
  let bytes = 0;
  try {
    bytes = await ex.send();
  } catch (e) {
    ctx.deps.log({ level: 'warn', msg: `ingress: sending the response failed: ${(e as Error).message}`, route: ex.route.id });
    (res as ServerResponse).destroy();
  }
  accessLog(ex, startedAt, ex.responseHead?.status, bytes);
}

export async function handleHttpsUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, ctx: HttpsContext): Promise<void> {
  const startedAt = performance.now();
  socket.on('error', () => {});
  // A response bound to the raw socket, for answers at the edge (refusals, errors).
  const res = new ServerResponse(req);
  res.assignSocket(socket as Socket);
  res.shouldKeepAlive = false;
  res.on('finish', () => socket.end());
  const upgrade = { socket, head, taken: false };
  const { ex, filters } = exchangeFor(req, res, ctx, upgrade);
  try {
    await runChain(filters, ex, (e) => passThroughUpgrade(e as HttpExchange));
  } catch (e) {
    internalFault(ex, e);
  }
  if (upgrade.taken && !ex.answered) {
    socket.once('close', () => accessLog(ex, startedAt, ex.responseHead?.status ?? 101, (socket as Socket).bytesWritten ?? 0));
    return;
  }
  const bytes = await ex.send().catch(() => 0);
  accessLog(ex, startedAt, ex.responseHead?.status, bytes);
}
