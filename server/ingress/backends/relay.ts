// A request relayed through an agent's tunnel: the body streams up (or the buffer a filter
// read), the answer's head is left on the exchange and its body streams back when sent.
// The agent's own 502 (it could not reach forwards_to) carries AGENT_ERROR_HEADER (protocol.ts).
import { constants, type ClientHttp2Stream } from 'node:http2';
import type { Duplex, Readable } from 'node:stream';
import { AGENT_ERROR_HEADER } from '../../../agent/protocol.js';
import { ApiError } from '../../http/errors.js';
import { backendError, edgeError, type HttpExchange } from '../http/exchange.js';
import { clientKey } from '../../http/rate-limit.js';
import { relayPooled, upstreamOf } from './relay-pooled.js';

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 60_000;

/** Opening a stream failed: the tunnel went offline, or its connection is still cancelling (752). */
function openFailed(e: unknown, tunnelId: string): never {
  if (e instanceof ApiError && e.code === 'ERR_SERVICE_752') throw edgeError(e.code, e.message);
  throw backendError('ERR_SERVICE_742', `the tunnel ${tunnelId} went offline`);
}

/**
 * Waiting for a stream's response head. Its listeners are functions shared by every stream
 * (an emitter calls a listener with itself as `this`), and the wait is kept on the stream:
 * this runs for every relayed request, and each closure made per request is garbage, and a
 * named one (tsx keeps names) one more defineProperty.
 */
interface HeadWait {
  resolve: (headers: ResponseHeaders) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
  timeoutMs: number;
  tunnelId: string;
  /** Still waiting for the request body to be sent before the time starts. */
  forBody: boolean;
}
type ResponseHeaders = Record<string, string | string[] | number | undefined>;
const WAIT = Symbol('head wait');
type Waiting = ClientHttp2Stream & { [WAIT]?: HeadWait };

function endWait(stream: Waiting): HeadWait | undefined {
  const w = stream[WAIT];
  if (!w) return undefined;
  stream[WAIT] = undefined;
  clearTimeout(w.timer);
  if (w.forBody) stream.off('finish', onBodySent);
  stream.off('response', onHead);
  stream.off('close', onClosedFirst);
  return w;
}
function onHead(this: Waiting, headers: ResponseHeaders) {
  endWait(this)?.resolve(headers);
}
function onClosedFirst(this: Waiting) {
  const w = endWait(this);
  w?.reject(backendError('ERR_SERVICE_743', `${upstreamOf(w.tunnelId)} closed the connection before answering`));
}
function onBodySent(this: Waiting) {
  const w = this[WAIT];
  if (!w) return;
  w.forBody = false;
  this.off('finish', onBodySent);
  startClock(this, w);
}
function startClock(stream: Waiting, w: HeadWait) {
  w.timer = setTimeout(onLate, w.timeoutMs, stream);
}
function onLate(stream: Waiting) {
  const w = endWait(stream);
  if (!w) return;
  stream.close(constants.NGHTTP2_CANCEL);
  w.reject(backendError('ERR_SERVICE_744', `${upstreamOf(w.tunnelId)} did not answer within ${Math.round(w.timeoutMs / 1000)} s`));
}
/** Errors of a relayed stream are answered through its close (responseOf) or by whoever reads it. */
function ignore() {}
/** The client went away: the relayed stream is cancelled (at the pace of reset-pacer.ts). */
function cancelRelayed(stream: ClientHttp2Stream) {
  if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
}

/**
 * Waits for the stream's response head; refused, closed or late is an edge error (upstream
 * failed). The time counts from the end of the request's body: an upload on a slow link takes
 * as long as it takes, and the upstream cannot be late before it has the whole request. Once
 * settled its listeners go: the stream's close after a normal answer must not build an error
 * (with its stack) on every request. Two listeners, not four `once`s: every listener added to
 * or removed from an HTTP/2 stream is an event of its own in Node, and each `once` a bound
 * function; a stream's error is always followed by its close, which is enough to fail on (the
 * caller keeps a listener for `error`).
 */
function responseOf(stream: Waiting, timeoutMs: number, tunnelId: string, afterBody: boolean): Promise<ResponseHeaders> {
  return new Promise((resolve, reject) => {
    const w: HeadWait = { resolve, reject, timer: undefined, timeoutMs, tunnelId, forBody: afterBody && !stream.writableFinished };
    stream[WAIT] = w;
    if (w.forBody) stream.on('finish', onBodySent);
    else startClock(stream, w);
    stream.on('response', onHead);
    stream.on('close', onClosedFirst);
  });
}

async function agentRefused(stream: ClientHttp2Stream, headers: Record<string, unknown>, tunnelId: string) {
  stream.close(constants.NGHTTP2_CANCEL);
  return backendError('ERR_SERVICE_743', `${upstreamOf(tunnelId)} is unreachable from its agent (${String(headers[AGENT_ERROR_HEADER])})`);
}

/**
 * Whether the client's request has no body: HTTP/1.1 without Content-Length (or 0) and without
 * Transfer-Encoding, or an HTTP/2 stream that ended with its headers.
 */
function bodyless(req: HttpExchange['req']): boolean {
  const h2 = (req as { stream?: { endAfterHeaders?: boolean } }).stream;
  if (h2 && typeof h2.endAfterHeaders === 'boolean') return h2.endAfterHeaders;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (length === undefined || Number(length) === 0);
}

export async function relayHttp(ex: HttpExchange, tunnelId: string): Promise<void> {
  const empty = ex.body ? ex.body.length === 0 : bodyless(ex.req);
  const gateway = ex.deps.gateway;
  // Over a pooled connection when one is idle (relay-pooled.ts); else, or when it failed
  // before answering a request that can be sent again, as a stream of its own.
  // Under the client's address: its cancels are paced and bounded as its own (reset-pacer.ts).
  const client = clientKey(ex.clientIp);
  let pooled;
  try {
    pooled = gateway.takePooled(tunnelId, client);
  } catch (e) {
    openFailed(e, tunnelId);
  }
  if (pooled) {
    gateway.relayed.pooled++;
    if (await relayPooled(ex, tunnelId, pooled, empty, ex.deps.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS)) return;
    gateway.relayed.pooled--;
  }
  gateway.relayed.stream++;
  let stream: ClientHttp2Stream;
  try {
    stream = ex.deps.gateway.openStream(tunnelId, { method: ex.method, path: ex.path, headers: ex.upstreamHeaders, endStream: empty }, client);
  } catch (e) {
    openFailed(e, tunnelId);
  }
  stream.on('error', ignore);
  // An unnamed closure (no property on the response, which would change its shape for Node's own code).
  (ex.res as unknown as NodeJS.EventEmitter).on('close', () => cancelRelayed(stream));
  if (empty) (ex.req as Readable).resume();
  else if (ex.body) stream.end(ex.body);
  else (ex.req as Readable).pipe(stream);
  const headers = await responseOf(stream, ex.deps.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS, tunnelId, true);
  if (headers[AGENT_ERROR_HEADER] !== undefined) throw await agentRefused(stream, headers, tunnelId);
  ex.respondUpstream(Number(headers[':status']), headers, stream);
}

/** A raw TCP stream through the tunnel (WebSockets, websocket_tcp_converter), once the agent reached the upstream. */
export async function relayTcp(ex: Pick<HttpExchange, 'deps'> & { clientIp?: string }, tunnelId: string): Promise<Duplex> {
  let stream: ClientHttp2Stream;
  try {
    stream = ex.deps.gateway.openTcp(tunnelId, ex.clientIp ? clientKey(ex.clientIp) : '');
  } catch (e) {
    openFailed(e, tunnelId);
  }
  stream.on('error', ignore);
  const headers = await responseOf(stream, ex.deps.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS, tunnelId, false);
  if (Number(headers[':status']) !== 200) {
    stream.close(constants.NGHTTP2_CANCEL);
    throw backendError('ERR_SERVICE_743', `${upstreamOf(tunnelId)} is unreachable from its agent`);
  }
  return stream;
}
