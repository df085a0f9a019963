// A request relayed through an agent's tunnel: the body streams up (or the buffer a filter
// read), the answer's head is left on the exchange and its body streams back when sent.
// The agent's own 502 (it could not reach forwards_to) carries AGENT_ERROR_HEADER (protocol.ts).
import { constants, type ClientHttp2Stream } from 'node:http2';
import type { Duplex, Readable } from 'node:stream';
import { AGENT_ERROR_HEADER } from '../../../agent/protocol.js';
import { ApiError } from '../../http/errors.js';
import { edgeError, type HttpExchange } from '../http/exchange.js';

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 60_000;

function open<T>(make: () => T, tunnelId: string): T {
  try {
    return make();
  } catch (e) {
    if (e instanceof ApiError && e.code === 'ERR_SERVICE_752') throw edgeError(e.code, e.message);
    throw edgeError('ERR_SERVICE_742', `the tunnel ${tunnelId} went offline`, true);
  }
}

/**
 * Waits for the stream's response head; refused, closed or late is an edge error (upstream
 * failed). The time counts from the end of the request's body: an upload on a slow link takes
 * as long as it takes, and the upstream cannot be late before it has the whole request. Once
 * settled its listeners go: the stream's close after a normal answer must not build an error
 * (with its stack) on every request. Two listeners, not four `once`s: every listener added to
 * or removed from an HTTP/2 stream is an event of its own in Node, and each `once` a bound
 * function; a stream's error is always followed by its close, which is enough to fail on (the
 * caller keeps a listener for `error` itself).
 */
function responseOf(stream: ClientHttp2Stream, timeoutMs: number, what: string, afterBody: boolean): Promise<Record<string, string | string[] | number | undefined>> {
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let waitingForBody = false;
    const settle = () => {
      clearTimeout(timer);
      if (waitingForBody) stream.off('finish', arm);
      stream.off('response', answered);
      stream.off('close', failed);
    };
    const answered = (h: Record<string, string | string[] | number | undefined>) => { settle(); resolve(h); };
    const failed = () => { settle(); reject(edgeError('ERR_SERVICE_743', `${what} closed the connection before answering`, true)); };
    function arm() {
      waitingForBody = false;
      timer = setTimeout(() => {
        settle();
        stream.close(constants.NGHTTP2_CANCEL);
        reject(edgeError('ERR_SERVICE_744', `${what} did not answer within ${Math.round(timeoutMs / 1000)} s`, true));
      }, timeoutMs);
    }
    if (!afterBody || stream.writableFinished) arm();
    else {
      waitingForBody = true;
      stream.once('finish', arm);
    }
    stream.on('response', answered);
    stream.on('close', failed);
  });
}

async function agentRefused(stream: ClientHttp2Stream, headers: Record<string, unknown>, what: string) {
  stream.close(constants.NGHTTP2_CANCEL);
  return edgeError('ERR_SERVICE_743', `${what} is unreachable from its agent (${String(headers[AGENT_ERROR_HEADER])})`, true);
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
  const what = `the upstream of tunnel ${tunnelId}`;
  const empty = ex.body ? ex.body.length === 0 : bodyless(ex.req);
  const stream = open(() => ex.deps.gateway.openStream(tunnelId, { method: ex.method, path: ex.path, headers: ex.upstreamHeaders, endStream: empty }), tunnelId);
  stream.on('error', () => {});
  const res = ex.res as unknown as NodeJS.EventEmitter;
  const abort = () => { if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL); };
  res.once('close', abort);
  if (empty) (ex.req as Readable).resume();
  else if (ex.body) stream.end(ex.body);
  else (ex.req as Readable).pipe(stream);
  const headers = await responseOf(stream, ex.deps.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS, what, true);
  if (headers[AGENT_ERROR_HEADER] !== undefined) throw await agentRefused(stream, headers, what);
  ex.respondUpstream(Number(headers[':status']), headers, stream);
}

/** A raw TCP stream through the tunnel (WebSockets, websocket_tcp_converter), once the agent reached the upstream. */
export async function relayTcp(ex: Pick<HttpExchange, 'deps'>, tunnelId: string): Promise<Duplex> {
  const stream = open(() => ex.deps.gateway.openTcp(tunnelId), tunnelId);
  stream.on('error', () => {});
  const headers = await responseOf(stream, ex.deps.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS, `the upstream of tunnel ${tunnelId}`, false);
  if (Number(headers[':status']) !== 200) {
    stream.close(constants.NGHTTP2_CANCEL);
    throw edgeError('ERR_SERVICE_743', `the upstream of tunnel ${tunnelId} is unreachable from its agent`, true);
  }
  return stream;
}
