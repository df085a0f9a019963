// Relayed streams, on the agent: each HTTP/2 stream the server opens is one request to the
// tunnel's upstream (bodies streamed both ways under backpressure, never buffered), or, for
// CONNECT, one raw TCP connection to it (TCP and TLS tunnels, WebSockets).
import { type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import net from 'node:net';
import type { Readable } from 'node:stream';
import { Agent, type Dispatcher } from 'undici';
import { AGENT_ERROR_HEADER, CONNECTION_HEADERS, httpUpstreamOf, TUNNEL_HEADER, type HttpUpstream } from './protocol.js';

/** Connection-specific headers, which neither HTTP/2 nor a relayed request carries (undici refuses `expect`). */
const HOP_BY_HOP = new Set<string>([...CONNECTION_HEADERS, 'expect', TUNNEL_HEADER]);

const dispatcher = new Agent({ connections: 256 });

/** host and port of a `forwards_to` (a URL or host:port). */
export function hostPortOf(forwardsTo: string): { host: string; port: number; tls: boolean } {
  const url = /^[a-z]+:\/\//i.test(forwardsTo) ? new URL(forwardsTo) : new URL(`tcp://${forwardsTo}`);
  const tls = url.protocol === 'https:' || url.protocol === 'tls:';
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port, tls };
}

function fail(stream: ServerHttp2Stream, status: number, msg: string, reason: string) {
  if (stream.destroyed) return;
  if (!stream.headersSent) {
    // Marked as the agent's own answer, so the edge tells it from an upstream's real 502.
    stream.respond({ ':status': status, 'content-type': 'text/plain; charset=utf-8', [AGENT_ERROR_HEADER]: reason });
    stream.end(`${msg}\n`);
  } else {
    // An answer cut short must reach the edge cut short: RST_STREAM (INTERNAL_ERROR). Node's
    // close(code) ends the stream's writable side first, and the edge would read END_STREAM,
    // a complete answer (a chunked body ends without its last chunk, and nothing says so).
    stream.destroy(new Error(msg));
  }
}

export function relayTcp(stream: ServerHttp2Stream, forwardsTo: string) {
  const { host, port } = hostPortOf(forwardsTo);
  const socket = net.connect({ host, port });
  socket.setNoDelay(true);
  socket.once('connect', () => {
    stream.respond({ ':status': 200 });
    stream.pipe(socket);
    socket.pipe(stream);
  });
  socket.on('error', (e) => fail(stream, 502, `the agent could not reach ${forwardsTo}: ${(e as NodeJS.ErrnoException).code ?? e.message}`, (e as NodeJS.ErrnoException).code ?? 'error'));
  stream.on('error', () => socket.destroy());
  stream.on('close', () => socket.destroy());
}

/** Where a `forwards_to` sends HTTP (parsed once per tunnel, not per request). */
const upstreams = new Map<string, HttpUpstream>();
function upstreamOf(forwardsTo: string): HttpUpstream {
  let u = upstreams.get(forwardsTo);
  if (!u) upstreams.set(forwardsTo, u = httpUpstreamOf(forwardsTo));
  return u;
}

/**
 * One relayed request: undici's dispatcher (keep-alive HTTP/1.1, no per-request
 * ClientRequest/IncomingMessage streams) sends it upstream; the request body is pulled from
 * the HTTP/2 stream as the upstream socket takes it, and each response chunk is written to
 * the stream, pausing the upstream while the stream's flow-control window is full. Nothing
 * is buffered beyond those windows.
 */
export function relayHttp(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, forwardsTo: string) {
  const up = upstreamOf(forwardsTo);
  const out: Record<string, string | string[]> = {};
  for (const k in headers) {
    const v = headers[k];
    if (v !== undefined && k.charCodeAt(0) !== 58 /* : */ && !HOP_BY_HOP.has(k)) out[k] = v;
  }
  out.host = String(headers[':authority'] ?? up.host);
  let controller: Dispatcher.DispatchController | undefined;
  let done = false;
  stream.on('error', () => controller?.abort(new Error('the relayed stream failed')));
  stream.on('close', () => { if (!done) controller?.abort(new Error('the relayed stream closed')); });
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(c) {
      controller = c;
      if (stream.destroyed) c.abort(new Error('the relayed stream closed'));
    },
    onResponseStart(c, statusCode, resHeaders) {
      // An informational answer (103 Early Hints) comes before the answer: skipped (undici
      // reads no body for it and goes on); responding with it would fail the request.
      if (statusCode < 200) return;
      if (stream.destroyed) return c.abort(new Error('the relayed stream closed'));
      const back: OutgoingHttpHeaders = { ':status': statusCode };
      for (const k in resHeaders) if (!HOP_BY_HOP.has(k)) back[k] = resHeaders[k];
      stream.respond(back);
    },
    onResponseData(c, chunk) {
      if (!stream.write(chunk)) {
        c.pause();
        stream.once('drain', () => c.resume());
      }
    },
    onResponseEnd() {
      done = true;
      stream.end();
    },
    onResponseError(_c, e) {
      done = true;
      fail(stream, 502, `the agent could not reach ${forwardsTo}: ${(e as NodeJS.ErrnoException).code ?? e.message}`, (e as NodeJS.ErrnoException).code ?? 'error');
    },
  };
  dispatcher.dispatch({
    origin: up.origin,
    method: String(headers[':method']) as Dispatcher.HttpMethod,
    path: `${up.prefix}${headers[':path'] ?? '/'}`,
    headers: out,
    // A request without a body ends with its HEADERS frame. Otherwise the body is read from
    // the stream as it comes (an iterator, pulled as the upstream socket takes it): undici
    // destroys a stream body at its end, which would reset the stream before the response.
    // (undici documents async iterables as bodies; its types list only Readable.)
    body: stream.endAfterHeaders ? null : (stream.iterator({ destroyOnReturn: false }) as unknown as Readable),
  }, handler);
}
