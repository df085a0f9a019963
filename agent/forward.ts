// Relayed streams, on the agent: each HTTP/2 stream the server opens is one request to the
// tunnel's upstream (bodies piped both ways, never buffered), or, for CONNECT, one raw TCP
// connection to it (TCP and TLS tunnels, WebSockets).
import http from 'node:http';
import https from 'node:https';
import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import net from 'node:net';
import { AGENT_ERROR_HEADER } from './protocol.js';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'http2-settings']);

const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 256 });

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
    stream.respond({ ':status': status, 'content-type': 'text/plain; charset=utf-8', [AGENT_ERROR_HEADER]: reason });
    stream.end(`${msg}\n`);
  } else stream.close(constants.NGHTTP2_INTERNAL_ERROR);
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

export function relayHttp(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, forwardsTo: string) {
  const base = /^[a-z]+:\/\//i.test(forwardsTo) ? new URL(forwardsTo) : new URL(`http://${forwardsTo}`);
  const secure = base.protocol === 'https:';
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) if (!k.startsWith(':') && !HOP_BY_HOP.has(k) && k !== 'edgeform-tunnel-id' && v !== undefined) out[k] = v;
  out.host = String(headers[':authority'] ?? base.host);
  const prefix = base.pathname === '/' ? '' : base.pathname.replace(/\/$/, '');
  const req = (secure ? https : http).request({
    protocol: base.protocol,
    hostname: base.hostname.replace(/^\[|\]$/g, ''),
    port: base.port || (secure ? 443 : 80),
    method: String(headers[':method']),
    path: `${prefix}${headers[':path'] ?? '/'}`,
    headers: out,
    agent: secure ? httpsAgent : httpAgent,
  });
  req.on('response', (res) => {
    const back: Record<string, string | string[] | number> = { ':status': res.statusCode ?? 502 };
    for (const [k, v] of Object.entries(res.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) back[k] = v;
    if (stream.destroyed) return res.destroy();
    stream.respond(back);
    res.pipe(stream);
    res.on('error', () => stream.close(constants.NGHTTP2_INTERNAL_ERROR));
  });
  req.on('error', (e) => fail(stream, 502, `the agent could not reach ${forwardsTo}: ${(e as NodeJS.ErrnoException).code ?? e.message}`, (e as NodeJS.ErrnoException).code ?? 'error'));
  stream.on('error', () => req.destroy());
  stream.on('close', () => { if (!req.writableFinished) req.destroy(); });
  stream.pipe(req);
}
