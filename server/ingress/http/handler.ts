// The HTTP side of the ingress: the listener (i-core) hands each HTTPS request, and each
// HTTP/1.1 Upgrade, of an edge here. The route is chosen, its filters run in MODULE_ORDER,
// the backend answers, and the answer streams back; one access-log line per request.
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { callbackRoute } from '../auth/callback-route.js';
import { connectEndpoint, endpointChain, pickEndpointTunnel, serveEndpoint } from '../agent-endpoints.js';
import { connectBackend, serveBackend, serveBackendNow } from '../backends/serve.js';
import { cloudEndpointFilter, fellThrough, publicCloudEndpoint } from '../cloud-endpoints.js';
import type { EdgeAnswer, Exchange, HttpFilter, HttpsEdgeEntry, IngressDeps, IngressTable } from '../types.js';
import { accessLogLine } from './access-log.js';
import { runChain } from './chain.js';
import { chainOf, compiledEdge } from './compile-edge.js';
import { errorAnswer } from './error-page.js';
import { EdgeError, HttpExchange } from './exchange.js';
import { chooseRoute, readPath, splitTarget } from './select-route.js';
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
  /** How the client reached the edge: `https` (a TLS listener, the default) or `http` (a `--ingress-http` listener). */
  scheme?: 'https' | 'http';
  /** The Host (or :authority) as the client sent it, when the listener has read it (else read here). */
  hostHeader?: string;
  /**
   * Called once the request's answer has been sent (with its access-log line), with the status
   * the client got: the listener's metrics and its count of requests in flight, without a
   * 'close' listener on every response.
   */
  answered?: (ctx: HttpsContext, status: number) => void;
  deps: IngressDeps;
}

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/**
 * The request target's path (read by readPath: canonical, or refused) and query. An
 * absolute-form target (`https://host/path`) keeps its path as sent: WHATWG URL parsing would
 * turn a backslash into `/` and resolve dots by rules of its own before the edge looks.
 */
function pathOf(target: string): { path: string; query: string; refused?: string } {
  let rest = target;
  if (!target.startsWith('/')) {
    const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(target);
    if (m) rest = target.slice(m[0].length);
  }
  const { path: raw, query } = splitTarget(rest);
  const read = readPath(raw);
  return read.refused === undefined ? { path: read.path, query } : { path: raw.startsWith('/') ? raw : `/${raw}`, query, refused: read.refused };
}

const connect = (ex: Exchange) => connectBackend(ex as HttpExchange);
const serve = (ex: Exchange) => serveBackend(ex as HttpExchange);
const ignore = () => {};

/**
 * Builds the exchange for a request of `ctx.edge` (answered already when no edge, route or
 * backend serves it). A fault while choosing (the compiled edge, the route, an endpoint's
 * modules) is answered 500 ERR_SERVICE_754 and logged, never left unanswered.
 */
function exchangeFor(req: Req, res: Res, ctx: HttpsContext, upgrade?: HttpExchange['upgrade']): { ex: HttpExchange; filters: readonly HttpFilter[]; endpoint?: string; cloud?: boolean } {
  try {
    return chooseExchange(req, res, ctx, upgrade);
  } catch (e) {
    ctx.deps.log({ level: 'error', msg: `ingress: choosing the route failed: ${(e as Error)?.stack ?? e}`, edge: ctx.edge?.doc.id, host: ctx.host });
    const ex = new HttpExchange({
      req, res, clientIp: ctx.clientIp, host: ctx.host, publicPort: ctx.publicPort, table: ctx.table, deps: ctx.deps, scheme: ctx.scheme,
      method: req.method ?? 'GET', path: req.url ?? '/', hostHeader: ctx.host, upgrade, connect, edge: ctx.edge?.doc ?? NO_DOC, route: NO_DOC,
    });
    ex.answer(errorAnswer('ERR_SERVICE_754', 'the edge failed while choosing a route for this request; the server log has the details'));
    return { ex, filters: NO_FILTERS };
  }
}

function chooseExchange(req: Req, res: Res, ctx: HttpsContext, upgrade?: HttpExchange['upgrade']): { ex: HttpExchange; filters: readonly HttpFilter[]; endpoint?: string; cloud?: boolean } {
  const { path, query, refused } = pathOf(req.url ?? '/');
  // HTTP/2's :authority first: it is what the listener checked against the connection's name (a
  // host header beside it, naming another site, must not reach the upstream).
  const hostHeader = ctx.hostHeader ?? String(req.headers[':authority'] ?? req.headers.host ?? ctx.host);
  const compiled = ctx.edge && compiledEdge(ctx.edge, ctx.table, ctx.deps);
  const callback = compiled && !refused ? callbackRoute(compiled.matchers, path, query) : undefined;
  const chosen = compiled && !refused && !callback ? chooseRoute(compiled.matchers, ctx.host, path) : undefined;
  const route = callback ?? chosen?.route;
  // No edge serves the name: an agent's endpoint may (agent-endpoints.ts).
  const endpoint = compiled ? undefined : pickEndpointTunnel(ctx.deps, ctx.host);
  const modules = endpoint ? endpointChain(ctx.deps, endpoint) : undefined;
  // Nor an agent's: a cloud endpoint may (cloud-endpoints.ts); its policy answers.
  const cloud = compiled || endpoint ? undefined : publicCloudEndpoint(ctx.table, ctx.host);
  const ex = new HttpExchange({
    req, res, clientIp: ctx.clientIp, host: ctx.host, publicPort: ctx.publicPort, table: ctx.table, deps: ctx.deps, scheme: ctx.scheme,
    method: req.method ?? 'GET', path: path + query, hostHeader, upgrade, connect: endpoint ? (e) => connectEndpoint(e as HttpExchange, endpoint) : connect,
    edge: ctx.edge?.doc ?? NO_DOC, route: route ?? modules?.route ?? (cloud ? { id: cloud.id } : NO_DOC),
  });
  if (cloud) return { ex, filters: [cloudEndpointFilter(cloud, ctx.deps)], cloud: true };
  if (modules) {
    if (!Array.isArray(modules.chain)) {
      ex.answer(modules.chain as EdgeAnswer);
      return { ex, filters: NO_FILTERS };
    }
    return { ex, filters: modules.chain as readonly HttpFilter[], endpoint };
  }
  if (!compiled) {
    ex.answer(errorAnswer('ERR_SERVICE_740', `no edge serves ${ctx.host} on port ${ctx.publicPort}`));
    return { ex, filters: NO_FILTERS };
  }
  if (refused || chosen?.ambiguous) {
    ex.answer(errorAnswer('ERR_SERVICE_864', `the request path is ambiguous: ${refused ?? chosen!.ambiguous}; send it in one spelling (docs/ingress.md, "Route selection")`));
    return { ex, filters: NO_FILTERS };
  }
  if (!route) {
    ex.answer(errorAnswer('ERR_SERVICE_741', `no route of this edge matches ${ctx.host}${path}`));
    return { ex, filters: NO_FILTERS };
  }
  const chain = chainOf(compiled, route, ctx.deps);
  if (!Array.isArray(chain)) {
    ex.answer(chain);
    return { ex, filters: NO_FILTERS };
  }
  return { ex, filters: chain };
}

/** The edge and route of a request no edge or route serves (read-only, shared). */
const NO_DOC: HttpExchange['edge'] = Object.freeze({ id: '' });
const NO_FILTERS: readonly HttpFilter[] = Object.freeze([]);

/** A request's end: its access-log line, then the listener's count of it. */
function requestDone(ex: HttpExchange, ctx: HttpsContext, startedAt: number, bytes: number) {
  accessLog(ex, startedAt, ex.responseStatus, bytes);
  ctx.answered?.(ctx, (ex.res as ServerResponse).statusCode);
}

function accessLog(ex: HttpExchange, startedAt: number, status: number | undefined, bytes: number) {
  const line = accessLogLine({
    edge: ex.edge.id, route: ex.route.id, method: ex.req.method, host: ex.host, port: ex.publicPort, path: pathOnly(ex.path), status,
    duration_ms: performance.now() - startedAt, bytes, client_ip: ex.clientIp, code: ex.code, detail: ex.detail,
  });
  if (ex.deps.writeLine) ex.deps.writeLine(line);
  else ex.deps.log(JSON.parse(line));
}

function pathOnly(path: string): string {
  const q = path.indexOf('?');
  return q < 0 ? path : path.slice(0, q);
}

function internalFault(ex: HttpExchange, e: unknown) {
  ex.deps.log({ level: 'error', msg: `ingress: request failed: ${(e as Error)?.stack ?? e}`, edge: ex.edge.id, route: ex.route.id });
  ex.fail(errorAnswer('ERR_SERVICE_749', 'the edge could not handle this request; the server log has the details'));
}

/**
 * One request: the chain, the backend, the answer, the access-log line. A request whose route
 * has no filters and whose backend answers at the edge (http_response) runs to its end here,
 * with no promise made; otherwise the returned promise settles when the answer is sent.
 */
export function handleHttpsRequest(req: Req, res: Res, ctx: HttpsContext): Promise<void> | undefined {
  const startedAt = performance.now();
  (res as NodeJS.EventEmitter).on('error', ignore);
  const { ex, filters, endpoint, cloud } = exchangeFor(req, res, ctx);
  let running: Promise<void> | undefined;
  try {
    // An exchange answered already (no edge, no route) goes straight to sending.
    if (cloud) running = runChain(filters, ex, fellThrough);
    else if (endpoint && !ex.answered) running = filters.length ? runChain(filters, ex, (e) => serveEndpoint(e as HttpExchange, endpoint)) : serveEndpoint(ex, endpoint);
    else if (!ex.answered) running = filters.length ? runChain(filters, ex, serve) : serveBackendNow(ex);
  } catch (e) {
    answerThrown(ex, e);
  }
  if (running) return finishLater(ex, ctx, running, startedAt);
  let sent: number | Promise<number> = 0;
  try {
    sent = ex.sendNow();
  } catch (e) {
    sendFailed(ex, e);
  }
  if (typeof sent !== 'number') return logWhenSent(ex, ctx, sent, startedAt);
  requestDone(ex, ctx, startedAt, sent);
  return undefined;
}

/** What a filter or backend threw: an edge error is the answer (as runChain makes it), anything else a fault. */
function answerThrown(ex: HttpExchange, e: unknown) {
  if (!(e instanceof EdgeError)) return internalFault(ex, e);
  if (e.upstreamFailed) ex.fail(e.answerWith);
  else ex.answer(e.answerWith);
}

function sendFailed(ex: HttpExchange, e: unknown) {
  ex.deps.log({ level: 'warn', msg: `ingress: sending the response failed: ${(e as Error).message}`, route: ex.route.id });
  (ex.res as ServerResponse).destroy();
}

async function finishLater(ex: HttpExchange, ctx: HttpsContext, running: Promise<void>, startedAt: number): Promise<void> {
  try {
    await running;
  } catch (e) {
    answerThrown(ex, e);
  }
  let bytes = 0;
  try {
    bytes = await ex.send();
  } catch (e) {
    sendFailed(ex, e);
  }
  requestDone(ex, ctx, startedAt, bytes);
}

async function logWhenSent(ex: HttpExchange, ctx: HttpsContext, sent: Promise<number>, startedAt: number): Promise<void> {
  let bytes = 0;
  try {
    bytes = await sent;
  } catch (e) {
    sendFailed(ex, e);
  }
  requestDone(ex, ctx, startedAt, bytes);
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
    socket.once('close', () => accessLog(ex, startedAt, ex.responseStatus ?? 101, (socket as Socket).bytesWritten ?? 0));
    return;
  }
  const bytes = await ex.send().catch(() => 0);
  accessLog(ex, startedAt, ex.responseStatus, bytes);
}
