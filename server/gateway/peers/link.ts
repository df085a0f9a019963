// The caller's end of the peer channel (protocol.ts): one HTTP/2 session to one other holder,
// its watch of that holder's tunnels, and the streams relayed to them. A link is bounded on
// its own: its connect and its pings time out (the peer is then dropped, with its tunnels,
// until a reconnect succeeds), so a slow or dead peer stalls only the requests sent to it.
import http2, { constants, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { ApiError } from '../../http/errors.js';
import type { PeerCredentials } from './credentials.js';
import { MAX_SNAPSHOT_BYTES, PEER_HEADERS, PEER_PATHS, type PeerRequest, type SharedTunnel, type Snapshot } from './protocol.js';

export interface LinkOptions {
  /** Connect (TCP, TLS, first snapshot) and ping answers must come within this (ms). */
  timeoutMs: number;
  /** How often the session is pinged (ms). */
  pingMs: number;
  log: (fields: Record<string, unknown>) => void;
  /**
   * Another way to reach the holder (a worker process over a socket pair, issue 34): any
   * HTTP/2 session to something that serves serveHolder(). Default: mutual TLS to `url`.
   */
  connect?: () => ClientHttp2Session;
}

const ignore = () => {};

export class PeerLink {
  private session?: ClientHttp2Session;
  private pinger?: NodeJS.Timeout;
  /** The holder's tunnels, from its latest snapshot; empty while not connected. */
  tunnels: SharedTunnel[] = [];
  /** Once the first snapshot arrived on the current session. */
  ready = false;
  closed = true;
  /** Earliest time of the next connect after a failure (backoff 250 ms doubling to 5 s). */
  retryAt = 0;
  private backoffMs = 250;
  private stopped = false;

  constructor(readonly instanceId: string, readonly url: string, private creds: PeerCredentials, private opts: LinkOptions, private changed: () => void) {}

  connect() {
    if (this.stopped || !this.closed) return;
    this.closed = false;
    this.ready = false;
    const session = this.opts.connect?.() ?? http2.connect(this.url, {
      ca: [this.creds.caPem], cert: this.creds.certPem, key: this.creds.keyPem, minVersion: 'TLSv1.3',
      // The peer proves itself by its certificate from the derived authority, not by a name.
      checkServerIdentity: () => undefined,
    });
    this.session = session;
    session.on('error', (e) => this.lost(session, e.message));
    session.once('close', () => this.lost(session, 'connection closed'));
    const first = setTimeout(() => this.lost(session, `no answer within ${this.opts.timeoutMs} ms`), this.opts.timeoutMs);
    first.unref();
    const watch = session.request({ ':method': 'GET', ':path': PEER_PATHS.watch }, { endStream: true });
    watch.on('error', ignore);
    watch.setEncoding('utf8');
    let buffered = '';
    watch.on('data', (chunk: string) => {
      buffered += chunk;
      if (buffered.length > MAX_SNAPSHOT_BYTES) return this.lost(session, 'a snapshot past its bound');
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let snap: Snapshot;
        try {
          snap = JSON.parse(line);
        } catch {
          return this.lost(session, 'a malformed snapshot');
        }
        if (!Array.isArray(snap?.tunnels)) return this.lost(session, 'a malformed snapshot');
        if (!this.ready) {
          clearTimeout(first);
          this.ready = true;
          this.backoffMs = 250;
          this.opts.log({ level: 'info', msg: 'peer connected', peer: this.instanceId, url: this.url });
        }
        this.tunnels = snap.tunnels.filter((t) => typeof t?.id === 'string');
        this.changed();
      }
    });
    // The holder ends its watch when it drains: no new streams go to it, those in flight finish.
    watch.once('close', () => this.lost(session, 'its watch ended', true));
    session.once('goaway', () => this.lost(session, 'it is going away', true));
    this.pinger = setInterval(() => {
      const late = setTimeout(() => this.lost(session, `no ping answer within ${this.opts.timeoutMs} ms`), this.opts.timeoutMs);
      late.unref();
      try {
        session.ping((err) => { clearTimeout(late); if (err) this.lost(session, err.message); });
      } catch {
        clearTimeout(late);
      }
    }, this.opts.pingMs);
    this.pinger.unref();
  }

  private lost(session: ClientHttp2Session, why: string, graceful = false) {
    if (this.session !== session) return;
    this.session = undefined;
    clearInterval(this.pinger);
    const had = this.ready;
    this.closed = true;
    this.ready = false;
    this.retryAt = Date.now() + this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, 5000);
    if (graceful) {
      session.close();
      // Streams in flight finish; a holder that never lets them is cut at the relay's own bound.
      setTimeout(() => session.destroy(), 120_000).unref();
    }
    else if (!session.destroyed) session.destroy();
    if (!this.stopped) this.opts.log({ level: had ? 'warn' : 'info', msg: `peer connection lost: ${why}`, peer: this.instanceId, url: this.url });
    if (this.tunnels.length) {
      this.tunnels = [];
      this.changed();
    }
  }

  private live(): ClientHttp2Session {
    const s = this.session;
    if (!s || !this.ready || s.destroyed || s.closed) throw new ApiError('ERR_SERVICE_742', `the server instance holding the tunnel (${this.url}) is not reachable`);
    return s;
  }

  /** Requests and connections sent over this link so far (for /metrics). */
  sent = 0;

  openStream(tunnelId: string, req: PeerRequest & { endStream?: boolean }, client = ''): ClientHttp2Stream {
    const headers = {
      ':method': 'POST', ':path': PEER_PATHS.http,
      [PEER_HEADERS.tunnel]: tunnelId, [PEER_HEADERS.client]: client,
      [PEER_HEADERS.request]: JSON.stringify({ method: req.method, path: req.path, headers: req.headers }),
    };
    const stream = this.live().request(headers, { endStream: !!req.endStream });
    this.sent++;
    return this.watchRefusal(tunnelId, stream);
  }

  openTcp(tunnelId: string, client = ''): ClientHttp2Stream {
    const stream = this.live().request({ ':method': 'POST', ':path': PEER_PATHS.tcp, [PEER_HEADERS.tunnel]: tunnelId, [PEER_HEADERS.client]: client });
    this.sent++;
    return this.watchRefusal(tunnelId, stream);
  }

  /**
   * The holder refused the stream (REFUSED_STREAM: it no longer has the tunnel, and its watch's
   * next line is on its way): the tunnel is taken out of this link's list at once, so the
   * caller's retry (ingress/backends/serve.ts, relayElsewhere) sees it offline and picks another.
   */
  private watchRefusal(tunnelId: string, stream: ClientHttp2Stream): ClientHttp2Stream {
    stream.once('close', () => {
      if (stream.rstCode !== constants.NGHTTP2_REFUSED_STREAM) return;
      const left = this.tunnels.filter((t) => t.id !== tunnelId);
      if (left.length === this.tunnels.length) return;
      this.tunnels = left;
      this.changed();
    });
    return stream;
  }

  stop() {
    this.stopped = true;
    const s = this.session;
    if (s) this.lost(s, 'stopped');
  }

  /** Whether the session is up (tunnel choice skips the tunnels of a peer that is not). */
  get up(): boolean {
    const s = this.session;
    return this.ready && !!s && !s.destroyed && !s.closed;
  }
}
