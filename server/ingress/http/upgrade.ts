// A WebSocket (any HTTP/1.1 Upgrade) passed through: a TCP stream to the backend through the
// tunnel, the client's upgrade request written into it with the edge's forwarding headers,
// then bytes both ways; the upstream's 101 (or refusal) reaches the client as it sent it.
import type { Duplex } from 'node:stream';
import { errorAnswer } from './error-page.js';
import { DEFAULT_UPSTREAM_IDLE_MS, edgeError, type HttpExchange } from './exchange.js';

export function requestHead(ex: HttpExchange): string {
  const lines = [`${ex.method} ${ex.path} HTTP/1.1`];
  const headers: Record<string, string | string[]> = { ...ex.upstreamHeaders, connection: 'Upgrade', upgrade: String(ex.req.headers.upgrade ?? 'websocket') };
  for (const [k, v] of Object.entries(headers)) for (const one of Array.isArray(v) ? v : [v]) lines.push(`${k}: ${one.replace(/[\r\n]/g, ' ')}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Joins two streams both ways; either end closing closes the other. */
export function splice(a: Duplex, b: Duplex) {
  a.pipe(b);
  b.pipe(a);
  const close = () => { a.destroy(); b.destroy(); };
  a.once('close', close);
  b.once('close', close);
  a.on('error', close);
  b.on('error', close);
}

/** An Upgrade header that names h2c among its protocols. */
const H2C = /(^|,)\s*h2c\s*(,|$)/i;

export async function passThroughUpgrade(ex: HttpExchange): Promise<void> {
  // h2c carries HTTP requests for any path: once an upstream had switched to it, the client's
  // requests would reach it past the routes and modules of the edge (h2c smuggling).
  if (H2C.test(String(ex.req.headers.upgrade ?? ''))) throw edgeError('ERR_SERVICE_753', 'an edge does not pass Upgrade: h2c to its upstream; over TLS, ask for HTTP/2 with ALPN (h2)');
  const upstream = await ex.connectBackend();
  const { socket, head } = ex.upgrade!;
  ex.upgrade!.taken = true;
  upstream.write(requestHead(ex));
  // The client's bytes go upstream only once the upstream has switched protocols. On a refused
  // upgrade they would be read as further HTTP requests on its connection, requests that no
  // route or module of the edge has seen (/admin past its ip_restriction): the upstream's answer
  // reaches the client, and the connection ends with it.
  let first = Buffer.alloc(0);
  // An upstream that never answers the upgrade: 504 after the upstream idle timeout, as a
  // relayed request's head (not a connection held forever).
  const idleMs = ex.deps.upstreamIdleMs ?? DEFAULT_UPSTREAM_IDLE_MS;
  const timer = idleMs > 0 ? setTimeout(() => {
    upstream.off('data', onHead);
    upstream.destroy();
    if (socket.destroyed) return;
    ex.fail(errorAnswer('ERR_SERVICE_744', `the upstream did not answer the upgrade within ${Math.round(idleMs / 1000)} s`));
    void ex.send().catch(() => socket.destroy());
  }, idleMs) : undefined;
  socket.once('close', () => clearTimeout(timer));
  const onHead = (c: Buffer) => {
    first = Buffer.concat([first, c]);
    if (first.indexOf('\r\n') < 0 && first.length < 32) return;
    clearTimeout(timer);
    upstream.off('data', onHead);
    upstream.pause();
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(first.subarray(0, 16).toString('latin1'));
    const status = m ? Number(m[1]) : 502;
    ex.respondStatus(status);
    socket.write(first);
    if (status !== 101) {
      upstream.on('error', () => socket.destroy());
      upstream.once('close', () => socket.destroy());
      socket.once('close', () => upstream.destroy());
      upstream.pipe(socket);
      upstream.end();
      return;
    }
    if (head.length) upstream.write(head);
    splice(socket, upstream);
  };
  upstream.on('data', onHead);
  upstream.once('close', () => { if (!first.length && !ex.answered) socket.destroy(); });
  socket.once('close', () => upstream.destroy());
}
