// A relayed HTTP request over a pooled connection to the tunnel's upstream (gateway/relay-pool.ts):
// the server speaks HTTP/1.1 to the upstream itself, through a CONNECT stream the agent joined
// to it. Same headers as a relayed stream (X-Forwarded-*, the client's Host), the path under
// the forwards_to's prefix as the agent would put it, the same edge errors and the same
// upstream timeout; the body streams both ways under backpressure.
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { CONNECTION_HEADERS } from '../../../agent/protocol.js';
import { PooledRequest, type PooledConnection, type PooledHeaders } from '../../gateway/relay-pool.js';
import { backendError, type EdgeError, type HttpExchange } from '../http/exchange.js';
import { tagClient } from '../../gateway/reset-pacer.js';
import { clientKey } from '../../http/rate-limit.js';

export const upstreamOf = (tunnelId: string) => `the upstream of tunnel ${tunnelId}`;

/**
 * Connection-specific headers: what the client sent of them is gone already (forwarded.ts),
 * but a route's request_headers or a traffic policy may add any name. HTTP/1.1 to the upstream
 * must not carry them (undici refuses most: Expect, Upgrade, Keep-Alive, Transfer-Encoding, a
 * Connection other than close or keep-alive), as a relayed stream does not (connection.ts, the
 * agent). Node's server has answered a client's Expect: 100-continue already.
 */
const CONNECTION_SPECIFIC = [...CONNECTION_HEADERS, 'expect'];
const carriesAny = (headers: Record<string, unknown>) => {
  for (const name of CONNECTION_SPECIFIC) if (headers[name] !== undefined) return true;
  return false;
};

/**
 * Methods a request may be sent twice with (RFC 9110 9.2.2). A pooled connection that fails
 * before any answer may have carried the request to the upstream already (an upstream that
 * crashed while handling it): sending a POST again could do its work twice, so it gets the
 * 502 a failed stream gets, as a proxy does (nginx retries only these by default).
 */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/**
 * The exchange's side of a pooled request: settles once, with the head on the exchange (true),
 * false for "send it again as a stream", or an edge error. Methods of one object per request
 * rather than named closures (each costs tsx's keep-names a defineProperty).
 */
class PooledExchange extends PooledRequest {
  private settled = false;
  private timer?: NodeJS.Timeout;
  constructor(
    pooled: PooledConnection,
    private readonly ex: HttpExchange,
    private readonly tunnelId: string,
    private readonly replayable: boolean,
    private readonly timeoutMs: number,
    private readonly resolve: (answered: boolean) => void,
    private readonly reject: (e: EdgeError) => void,
  ) {
    super(pooled);
  }

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearTimeout(this.timer);
    return true;
  }

  protected head(status: number, headers: PooledHeaders, body: Readable) {
    if (!this.settle()) return void body.destroy();
    this.ex.respondUpstream(status, headers, body);
    this.resolve(true);
  }

  protected failed() {
    if (!this.settle()) return;
    if (this.replayable) this.resolve(false);
    else this.reject(backendError('ERR_SERVICE_743', `${upstreamOf(this.tunnelId)} closed the connection before answering`));
  }

  protected bodySent() {
    return this.replayable || (this.ex.req as Readable).readableEnded;
  }

  /** The time counts from the end of the request's body, as on a stream (relay.ts). */
  startClock() {
    if (!this.settled) this.timer = setTimeout(onLate, this.timeoutMs, this);
  }

  late() {
    if (!this.settle()) return;
    this.cancel();
    this.reject(backendError('ERR_SERVICE_744', `${upstreamOf(this.tunnelId)} did not answer within ${Math.round(this.timeoutMs / 1000)} s`));
  }

  /** Cancelling closes the pooled connection's stream: its reset is paced as the client's own (reset-pacer.ts). */
  override cancel() {
    tagClient(this.pooled.stream, clientKey(this.ex.clientIp));
    super.cancel();
  }

  gone() {
    this.cancel();
    if (!this.settle()) return;
    this.reject(backendError('ERR_SERVICE_743', `the client went away before ${upstreamOf(this.tunnelId)} answered`));
  }
}
function onLate(r: PooledExchange) { r.late(); }

/**
 * Resolves true once the answer's head is on the exchange; false when the connection failed
 * before any answer and the request can be sent again as it was (an idempotent method, and no
 * body or a buffered one):
 * a pooled connection the upstream closed while idle is not the client's failure, and the
 * caller sends it as its own stream. Otherwise the failure is an edge error, as on a stream.
 */
export function relayPooled(ex: HttpExchange, tunnelId: string, pooled: { conn: PooledConnection; prefix: string }, empty: boolean, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    // The exchange's upstream headers as they are (undici only reads them), copied only to change them.
    let headers = ex.upstreamHeaders;
    let body: Buffer | AsyncIterable<Buffer> | null = null;
    if (empty) (ex.req as Readable).resume();
    else if (ex.body) {
      body = ex.body;
      headers = { ...headers, 'content-length': String(ex.body.length) };
    } else body = (ex.req as Readable).iterator({ destroyOnReturn: false });
    if (carriesAny(headers)) {
      headers = { ...headers };
      for (const name of CONNECTION_SPECIFIC) delete headers[name];
    }
    const replayable = (body === null || Buffer.isBuffer(body)) && IDEMPOTENT.has(ex.method);
    const request = new PooledExchange(pooled.conn, ex, tunnelId, replayable, timeoutMs, resolve, reject);
    // Unnamed closures, not properties on the request and response (which would change their
    // shapes for Node's own code).
    if (replayable) request.startClock();
    else (ex.req as Readable).once('end', () => request.startClock());
    (ex.res as unknown as NodeJS.EventEmitter).on('close', () => request.gone());
    // (undici documents async iterables as bodies; its types list only Readable.)
    pooled.conn.client.dispatch({ path: `${pooled.prefix}${ex.path}`, method: ex.method as Dispatcher.HttpMethod, headers, body: body as Dispatcher.DispatchOptions['body'] }, request);
  });
}
