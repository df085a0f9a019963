// The channel between an ingress worker and the process holding the agents (the primary): a
// worker reaches a tunnel it does not hold through one HTTP/2 connection over a Unix socket,
// one stream per relayed request or TCP stream, which the holder pipes into its own
// `gateway.openStream` / `gateway.openTcp`. The worker gets a ClientHttp2Stream, as from
// gateway.openStream, so the ingress does not know the difference: one extra in-memory hop.
// A worker's pooled upstream connections (gateway/relay-pool.ts) are TCP streams of this
// channel (openUpstream): the holder joins each to a CONNECT stream to the agent and passes
// bytes on, the HTTP/1.1 over it is the worker's.
//
// The shape is that of the channel between instances (server/gateway/peers/, issue 33): a
// stream to another holder naming a tunnel. The two can become one: the holder side here is
// `serveHolder` (what a peer instance's endpoint does with a stream), the asking side
// `HolderClient` (what an instance asks a peer); only the transport (a Unix socket here, a TLS
// connection between instances there) and the peers' authentication differ.
import fs from 'node:fs';
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import net from 'node:net';
import { CONNECTION_HEADERS } from '../../agent/protocol.js';
import { H2_WINDOW, OPEN_TIMEOUT_MS, RELAY_WINDOW } from '../gateway/connection.js';
import { upstreamReached } from '../gateway/relay-pool.js';
import type { Gateway } from '../gateway/gateway.js';

/** Headers of a channel stream that name what it is for; removed before the agent sees the rest. */
const TUNNEL = 'edgeform-holder-tunnel';
const KIND = 'edgeform-holder-kind';
const CLIENT = 'edgeform-holder-client';
/** The request has no body (the agent's stream says so in its HEADERS frame, as gateway.openStream's endStream). */
const NO_BODY = 'edgeform-holder-no-body';
const OWN = new Set([TUNNEL, KIND, CLIENT, NO_BODY, ':method', ':path', ':scheme', ':authority']);
/** What HTTP/2 does not carry (connection-specific); Host goes as :authority and comes back as host. */
const HOP_BY_HOP = new Set([...CONNECTION_HEADERS, 'host']);
/** As the agents' connections (gateway/connection.ts): a stream's window bounds what one waits with. */
const SETTINGS = { initialWindowSize: RELAY_WINDOW, maxHeaderListSize: 64 * 1024, enablePush: false };

export interface RelayRequest { method: string; path: string; headers?: Record<string, string | string[] | undefined>; endStream?: boolean }

/** Joins a channel stream and the agent's stream both ways, answers and resets included. */
function join(from: ServerHttp2Stream, to: ClientHttp2Stream) {
  to.on('response', (headers) => {
    if (from.destroyed || from.headersSent) return;
    const out: http2.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(headers)) if (v !== undefined && (k === ':status' || !k.startsWith(':'))) out[k] = v as string | string[] | number;
    try {
      from.respond(out);
    } catch {
      to.close(http2.constants.NGHTTP2_CANCEL);
      return;
    }
    to.pipe(from);
  });
  from.pipe(to);
  to.on('error', () => {});
  from.on('error', () => {});
  // A reset on either side is a reset on the other (the ingress answers 502, the agent stops).
  to.on('close', () => {
    if (!from.destroyed && !from.closed && to.rstCode && to.rstCode !== http2.constants.NGHTTP2_NO_ERROR) from.close(to.rstCode);
    else if (!from.headersSent && !from.destroyed) from.close(http2.constants.NGHTTP2_REFUSED_STREAM);
  });
  from.on('close', () => {
    if (!to.destroyed && !to.closed && from.rstCode && from.rstCode !== http2.constants.NGHTTP2_NO_ERROR) to.close(from.rstCode);
  });
}

/** The holder's side: streams naming a tunnel, piped into `gateway`. Returns how to stop it. */
export async function serveHolder(socketPath: string, gateway: Gateway, log: (f: Record<string, unknown>) => void): Promise<{ close(): Promise<void> }> {
  fs.rmSync(socketPath, { force: true });
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer({ settings: { ...SETTINGS, maxConcurrentStreams: 1 << 20 }, maxSessionMemory: 64 });
  server.on('session', (s) => {
    sessions.add(s);
    s.on('connect', () => { try { s.setLocalWindowSize(H2_WINDOW * 4); } catch { /* closed */ } });
    s.on('close', () => sessions.delete(s));
    s.on('error', () => {});
  });
  server.on('stream', (stream, headers: IncomingHttpHeaders) => {
    const tunnel = String(headers[TUNNEL] ?? '');
    const client = String(headers[CLIENT] ?? '');
    let up: ClientHttp2Stream;
    try {
      if (headers[KIND] === 'tcp') up = gateway.openTcp(tunnel, client);
      else {
        const rest: Record<string, string | string[] | undefined> = { host: headers[':authority'] };
        for (const [k, v] of Object.entries(headers)) if (!OWN.has(k)) rest[k] = v as string | string[] | undefined;
        up = gateway.openStream(tunnel, { method: String(headers[':method']), path: String(headers[':path']), headers: rest, endStream: headers[NO_BODY] === '1' }, client);
      }
    } catch (e) {
      // The tunnel went away between the worker's look and this stream: refused, as a gone agent's.
      log({ level: 'debug', msg: `holder channel: ${(e as Error).message}`, tunnel });
      stream.on('error', () => {});
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    join(stream, up);
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(socketPath, () => resolve()));
  fs.chmodSync(socketPath, 0o600);
  return {
    close: () => new Promise<void>((resolve) => {
      for (const s of sessions) s.close();
      server.close(() => resolve());
      fs.rmSync(socketPath, { force: true });
    }),
  };
}

/** The asking side: what a worker calls instead of gateway.openStream / openTcp. */
export class HolderClient {
  private session?: ClientHttp2Session;
  constructor(private readonly socketPath: string) {}

  private connection(): ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const s = http2.connect('http://holder.invalid', {
      createConnection: () => net.connect(this.socketPath).setNoDelay(true),
      settings: SETTINGS,
      maxSessionMemory: 64,
    });
    s.on('connect', () => { try { s.setLocalWindowSize(H2_WINDOW * 4); } catch { /* closed */ } });
    s.on('error', () => {});
    s.on('close', () => { if (this.session === s) this.session = undefined; });
    s.unref();
    this.session = s;
    return s;
  }

  openStream(tunnelId: string, req: RelayRequest, client = ''): ClientHttp2Stream {
    const headers: Record<string, string | string[]> = { ':method': req.method, ':path': req.path, [TUNNEL]: tunnelId, [CLIENT]: client };
    const host = req.headers?.host ?? req.headers?.[':authority'];
    if (host) headers[':authority'] = String(host);
    if (req.endStream) headers[NO_BODY] = '1';
    for (const [k, v] of Object.entries(req.headers ?? {})) if (v !== undefined && !k.startsWith(':') && !HOP_BY_HOP.has(k.toLowerCase())) headers[k] = v;
    return this.connection().request(headers, { endStream: req.endStream ?? false });
  }

  openTcp(tunnelId: string, client = ''): ClientHttp2Stream {
    return this.connection().request({ ':method': 'POST', ':path': '/', [TUNNEL]: tunnelId, [KIND]: 'tcp', [CLIENT]: client }, { endStream: false });
  }

  /**
   * A connection for a worker's pool (gateway/relay-pool.ts): a TCP stream through the holder
   * to the tunnel's upstream, once the agent reached it. The holder only passes its bytes on
   * (join); the HTTP/1.1 over it is the worker's, as the holder's own pooled connections are its own.
   */
  openUpstream(tunnelId: string): Promise<ClientHttp2Stream> {
    return upstreamReached(this.openTcp(tunnelId), OPEN_TIMEOUT_MS);
  }

  close() {
    this.session?.close();
  }
}
