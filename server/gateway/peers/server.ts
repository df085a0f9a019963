// The holder's end of the peer channel (protocol.ts): a listener for the other instances
// (`--peer-listen`), and serveHolder(), which answers one stream from its local tunnels.
// Anything that is not a peer's mutual-TLS handshake is closed in the handshake; a malformed
// stream is answered 400 and closed; a stream whose tunnel is gone is refused. Nothing here
// throws out of an event handler.
import http2, { constants, type ClientHttp2Stream, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { PeerCredentials } from './credentials.js';
import { PEER_HEADERS, PEER_PATHS, type LocalHolder, type PeerRequest } from './protocol.js';

export interface PeerServerOptions {
  host: string;
  port: number;
  /** A TLS handshake not finished within this is cut (ms). */
  handshakeTimeoutMs: number;
  log: (fields: Record<string, unknown>) => void;
}

const ignore = () => {};

export class PeerServer {
  private server?: http2.Http2SecureServer;
  private sessions = new Set<http2.ServerHttp2Session>();
  /** Peer streams relayed now (for /metrics and tests). */
  active = 0;
  /** Peer streams relayed so far (for /metrics). */
  served = 0;
  /** Open watches: ended when this listener stops, so callers send nothing new. */
  readonly watches = new Set<ServerHttp2Stream>();

  constructor(private holder: LocalHolder, private creds: PeerCredentials, private opts: PeerServerOptions) {}

  async start(): Promise<string> {
    const server = http2.createSecureServer({
      key: this.creds.keyPem, cert: this.creds.certPem, ca: [this.creds.caPem],
      requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3', allowHTTP1: false,
      handshakeTimeout: this.opts.handshakeTimeoutMs,
    });
    this.server = server;
    // Refused handshakes (no key, garbage, plain HTTP) end here, quietly: a scanner fills no log.
    server.on('tlsClientError', ignore);
    server.on('sessionError', ignore);
    server.on('session', (s) => {
      this.sessions.add(s);
      s.on('error', ignore);
      s.once('close', () => this.sessions.delete(s));
    });
    server.on('stream', (stream, headers) => {
      stream.on('error', ignore);
      try {
        serveHolder(this.holder, stream, headers, this);
      } catch (e) {
        this.opts.log({ level: 'warn', msg: `peer stream failed: ${(e as Error).message}` });
        if (!stream.destroyed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => { server.off('error', reject); resolve(); });
    });
    server.on('error', (e) => this.opts.log({ level: 'warn', msg: `peer listener: ${e.message}` }));
    const a = server.address() as AddressInfo;
    return `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
  }

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  /** Stops accepting; streams in flight finish (up to `deadlineMs`), then every session is closed. */
  async stop(deadlineMs: number) {
    const server = this.server;
    if (!server) return;
    server.close();
    for (const w of this.watches) w.close(constants.NGHTTP2_NO_ERROR);
    // Watches never end by themselves: closing a session lets its streams in flight finish and starts no new ones.
    for (const s of this.sessions) s.close();
    const deadline = Date.now() + deadlineMs;
    while (this.sessions.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const s of this.sessions) s.destroy();
  }
}

/** Answers one peer stream from the holder's own tunnels. */
export function serveHolder(holder: LocalHolder, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, counter: { active: number; served?: number; watches: Set<ServerHttp2Stream> }) {
  const path = headers[':path'];
  if (path === PEER_PATHS.watch) return watch(holder, stream, counter.watches);
  const tunnelId = headers[PEER_HEADERS.tunnel];
  const client = String(headers[PEER_HEADERS.client] ?? '');
  if (typeof tunnelId !== 'string' || headers[':method'] !== 'POST' || (path !== PEER_PATHS.http && path !== PEER_PATHS.tcp)) return badRequest(stream);
  let upstream: ClientHttp2Stream;
  let endStream = false;
  try {
    if (path === PEER_PATHS.http) {
      const req = parseRequest(headers[PEER_HEADERS.request]);
      if (!req) return badRequest(stream);
      endStream = stream.endAfterHeaders;
      upstream = holder.openLocalStream(tunnelId, { ...req, endStream }, client);
    } else {
      upstream = holder.openLocalTcp(tunnelId, client);
    }
  } catch {
    // Gone from here (or its connection is cancelling too much): the caller may try another.
    return void stream.close(constants.NGHTTP2_REFUSED_STREAM);
  }
  counter.active++;
  if (counter.served !== undefined) counter.served++;
  upstream.on('error', ignore);
  let answered = false;
  upstream.once('response', (h) => {
    answered = true;
    if (stream.destroyed) return;
    const out: Record<string, string | string[] | number> = { ':status': Number(h[':status']) || 502 };
    for (const k in h) {
      const v = h[k];
      if (k.charCodeAt(0) !== 58 && v !== undefined) out[k] = v;
    }
    stream.respond(out);
    upstream.pipe(stream);
  });
  // Either end going away takes the other with it: the agent's reset reaches the caller, the caller's cancel the agent.
  upstream.once('close', () => {
    counter.active--;
    if (stream.destroyed) return;
    if (!answered) stream.close(upstream.rstCode || constants.NGHTTP2_CANCEL);
    else if (upstream.rstCode && upstream.rstCode !== constants.NGHTTP2_NO_ERROR) stream.close(upstream.rstCode);
  });
  stream.once('close', () => {
    if (!upstream.destroyed && (!upstream.readableEnded || !upstream.writableFinished)) upstream.close(constants.NGHTTP2_CANCEL);
  });
  if (!endStream) stream.pipe(upstream);
}

function watch(holder: LocalHolder, stream: ServerHttp2Stream, watches: Set<ServerHttp2Stream>) {
  watches.add(stream);
  stream.once('close', () => watches.delete(stream));
  stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
  let queued = false;
  const send = () => {
    queued = false;
    if (stream.destroyed) return;
    stream.write(`${JSON.stringify({ tunnels: holder.sharedTunnels() })}\n`);
  };
  // Changes in one turn (a session's tunnels) make one line.
  const changed = () => {
    if (queued) return;
    queued = true;
    setImmediate(send);
  };
  const off = holder.onTunnelsChanged(changed);
  stream.once('close', off);
  send();
}

function parseRequest(raw: string | string[] | undefined): PeerRequest | undefined {
  if (typeof raw !== 'string') return undefined;
  try {
    const r = JSON.parse(raw) as PeerRequest;
    if (typeof r?.method !== 'string' || typeof r.path !== 'string' || (r.headers !== undefined && (typeof r.headers !== 'object' || r.headers === null))) return undefined;
    return r;
  } catch {
    return undefined;
  }
}

function badRequest(stream: ServerHttp2Stream) {
  if (stream.destroyed) return;
  stream.respond({ ':status': 400 }, { endStream: true });
}
