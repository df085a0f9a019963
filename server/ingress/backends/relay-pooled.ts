// A relayed HTTP request over a pooled connection to the tunnel's upstream (gateway/relay-pool.ts):
// the server speaks HTTP/1.1 to the upstream itself, through a CONNECT stream the agent joined
// to it. Same headers as a relayed stream (X-Forwarded-*, the client's Host), the path under
// the forwards_to's prefix as the agent would put it, the same edge errors and the same
// upstream timeout; the body streams both ways under backpressure.
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { PooledRequest, type PooledConnection } from '../../gateway/relay-pool.js';
import { edgeError, type HttpExchange } from '../http/exchange.js';

export const upstreamOf = (tunnelId: string) => `the upstream of tunnel ${tunnelId}`;

/**
 * Resolves true once the answer's head is on the exchange; false when the connection failed
 * before any answer and the request can be sent again as it was (no body, or a buffered one):
 * a pooled connection the upstream closed while idle is not the client's failure, and the
 * caller sends it as its own stream. Otherwise the failure is an edge error, as on a stream.
 */
export function relayPooled(ex: HttpExchange, tunnelId: string, pooled: { conn: PooledConnection; prefix: string }, empty: boolean, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const source = ex.upstreamHeaders;
    const headers: Record<string, string | string[]> = {};
    // undici refuses Expect (Node's server has answered 100-continue already).
    for (const k in source) if (k !== 'expect') headers[k] = source[k];
    let body: Buffer | AsyncIterable<Buffer> | null = null;
    if (empty) (ex.req as Readable).resume();
    else if (ex.body) {
      body = ex.body;
      headers['content-length'] = String(ex.body.length);
    } else body = (ex.req as Readable).iterator({ destroyOnReturn: false });
    const replayable = body === null || Buffer.isBuffer(body);
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const settle = () => {
      settled = true;
      clearTimeout(timer);
    };
    const request = new PooledRequest(pooled.conn, (status, head, stream) => {
      settle();
      ex.respondUpstream(status, head, stream);
      resolve(true);
    }, () => {
      if (settled) return;
      settle();
      if (replayable) resolve(false);
      else reject(edgeError('ERR_SERVICE_743', `${upstreamOf(tunnelId)} closed the connection before answering`, true));
    }, replayable ? undefined : () => (ex.req as Readable).readableEnded);
    const late = () => {
      if (settled) return;
      settle();
      request.cancel();
      reject(edgeError('ERR_SERVICE_744', `${upstreamOf(tunnelId)} did not answer within ${Math.round(timeoutMs / 1000)} s`, true));
    };
    // The time counts from the end of the request's body, as on a stream (relay.ts).
    const startClock = () => { if (!settled) timer = setTimeout(late, timeoutMs); };
    if (body === null || replayable) startClock();
    else (ex.req as Readable).once('end', startClock);
    (ex.res as unknown as NodeJS.EventEmitter).on('close', () => {
      request.cancel();
      if (settled) return;
      settle();
      reject(edgeError('ERR_SERVICE_743', `the client went away before ${upstreamOf(tunnelId)} answered`, true));
    });
    // (undici documents async iterables as bodies; its types list only Readable.)
    pooled.conn.client.dispatch({ path: `${pooled.prefix}${ex.path}`, method: ex.method as Dispatcher.HttpMethod, headers, body: body as Dispatcher.DispatchOptions['body'] }, request);
  });
}
