// One agent's connection, seen from the server: an HTTP/2 client session over the socket the
// agent upgraded. The server opens every stream: small JSON control requests, and the
// relayed streams (the agent is the HTTP/2 server and forwards each to its upstream).
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import { CONNECTION_HEADERS, MAX_CONTROL_BODY, TUNNEL_HEADER } from '../../agent/protocol.js';
import { ApiError } from '../http/errors.js';
import { RESET_PACE, ResetPacer, type ResetPace } from './reset-pacer.js';
import { RelayPool, upstreamReached, type PooledConnection } from './relay-pool.js';

/** HTTP/2 settings of both ends: a large window so one stream can fill a fast link. */
export const H2_WINDOW = 4 * 1024 * 1024;
/**
 * What an agent may send the server on one stream before the server has passed it on: an
 * answer for a client that does not read waits here, in memory, up to this much per relayed
 * request (times 100 streams per HTTP/2 client connection, times --ingress-relays-per-client per
 * address: docs/ingress.md, "Limits and what they protect"). 4 MiB let 1 MB of requests from
 * one client hold 400 MB; 512 KiB still fills 80 Mbit/s per stream at 50 ms between agent and server.
 */
export const RELAY_WINDOW = 512 * 1024;
export const H2_SETTINGS = { initialWindowSize: RELAY_WINDOW, maxHeaderListSize: 64 * 1024, enablePush: false };

/** Headers HTTP/2 forbids (connection-specific; Host goes as :authority); a relayed request drops them. */
const HOP_BY_HOP = new Set<string>([...CONNECTION_HEADERS, 'host']);

/**
 * The options of a relayed stream, made once: Node's `request()` copies them and fills in the
 * priority fields it finds missing (weight, parent, exclusive, silent) on every call, which
 * cost about a tenth of its time per stream; given here, they are only checked.
 */
const STREAM_OPTIONS = { weight: 16, parent: 0, exclusive: false, silent: false } as const;
const WITH_BODY = { ...STREAM_OPTIONS, endStream: false };
const WITHOUT_BODY = { ...STREAM_OPTIONS, endStream: true };

export class TimeoutError extends Error {}

/** How long the agent has to reach a tunnel's upstream for a pooled connection. */
export const OPEN_TIMEOUT_MS = 10_000;

export interface ControlReply { status: number; body: any }

export class AgentConnection {
  readonly h2: ClientHttp2Session;
  private pingTimer?: NodeJS.Timeout;
  private closed = false;
  readonly done: Promise<void>;
  /** Per tunnel, its pooled upstream connections (relay-pool.ts). */
  private readonly pools = new Map<string, RelayPool>();
  /** Cancels of relayed streams go at a pace the agent's HTTP/2 server accepts (reset-pacer.ts). */
  private resets: ResetPacer;

  constructor(readonly socket: Socket, heartbeatMs: number, onClose: () => void, pace: ResetPace = RESET_PACE) {
    this.resets = new ResetPacer(() => this.closed || this.h2.destroyed, pace);
    this.h2 = http2.connect('http://agent.invalid', {
      createConnection: () => socket,
      settings: H2_SETTINGS,
      maxSessionMemory: 64,
      peerMaxConcurrentStreams: 1000,
    });
    this.h2.on('connect', () => this.h2.setLocalWindowSize(H2_WINDOW * 4));
    this.h2.on('error', () => {});
    socket.on('error', () => {});
    let resolve!: () => void;
    this.done = new Promise((r) => { resolve = r; });
    const finish = () => {
      if (this.closed) return;
      this.closed = true;
      clearInterval(this.pingTimer);
      for (const p of this.pools.values()) p.closeAll();
      onClose();
      resolve();
    };
    this.h2.on('close', finish);
    socket.on('close', finish);
    // The agent leaving (GOAWAY, or its half of the socket closed) ends the session now.
    this.h2.on('goaway', () => this.destroy());
    socket.on('end', () => this.destroy());
    // Liveness: a ping every half interval; one still unanswered when the next is due ends
    // the connection, so a vanished agent is gone within one heartbeat interval.
    let outstanding = false;
    this.pingTimer = setInterval(() => {
      if (outstanding) return this.destroy();
      outstanding = true;
      try {
        this.h2.ping((err) => { if (!err) outstanding = false; });
      } catch {
        this.destroy();
      }
    }, Math.max(50, heartbeatMs / 2));
  }

  get isClosed() { return this.closed; }

  destroy() {
    if (this.closed) return;
    this.h2.destroy();
    this.socket.destroy();
  }

  /** A JSON control request; the reply body is read up to MAX_CONTROL_BODY. */
  control(path: string, body: unknown, timeoutMs: number): Promise<ControlReply> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('the agent connection is closed'));
      let stream: ClientHttp2Stream;
      try {
        stream = this.h2.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
      } catch (e) {
        return reject(e);
      }
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(new TimeoutError(`the agent did not answer ${path} within ${timeoutMs} ms`));
      }, timeoutMs);
      let status = 0;
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('response', (h) => { status = Number(h[':status']); });
      stream.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_CONTROL_BODY) {
          clearTimeout(timer);
          stream.close(http2.constants.NGHTTP2_CANCEL);
          reject(new ApiError('ERR_SERVICE_111', `the agent's reply to ${path} is over ${MAX_CONTROL_BODY} bytes`));
        } else chunks.push(c);
      });
      stream.on('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          return reject(new ApiError('ERR_SERVICE_110', `the agent's reply to ${path} is not JSON`));
        }
        resolve({ status, body: parsed });
      });
      stream.on('error', (e) => { clearTimeout(timer); reject(e); });
      stream.end(JSON.stringify(body));
    });
  }

  /** A relayed HTTP request to a tunnel's upstream: write the body to the stream, read the response from it. */
  openStream(tunnelId: string, req: { method: string; path: string; headers?: Record<string, string | string[] | undefined>; endStream?: boolean }, client = ''): ClientHttp2Stream {
    this.refuseWhileResetting(client);
    // One pass, pseudo-headers first (Node copies the object once more itself).
    const host = req.headers?.host ?? req.headers?.[':authority'];
    const headers: OutgoingHttpHeaders = { ':method': req.method, ':path': req.path, ':scheme': 'http' };
    if (host) headers[':authority'] = String(host);
    for (const k in req.headers) {
      const v = req.headers[k];
      if (v === undefined || k.charCodeAt(0) === 58 /* : */) continue;
      const name = k.toLowerCase();
      if (!HOP_BY_HOP.has(name) && name !== TUNNEL_HEADER) headers[name] = v;
    }
    headers[TUNNEL_HEADER] = tunnelId;
    // endStream: a request without a body says so in its HEADERS frame, so the agent sends it
    // upstream at once, without a body to wait for (a GET made chunked, waiting for its end).
    return this.resets.paced(this.h2.request(headers, req.endStream === true ? WITHOUT_BODY : WITH_BODY), client);
  }

  /**
   * An idle pooled connection to the tunnel's upstream (relay-pool.ts), or undefined (then the
   * request goes as its own stream, and the pool opens one more if it has room).
   */
  takePooled(tunnelId: string, poolSize: number, client = ''): PooledConnection | undefined {
    if (this.closed) return undefined;
    // A client over its share of waiting cancels is refused here too: each pooled request it
    // cancels closes a pooled connection, whose reset waits like a stream's.
    this.refuseClient(client);
    let pool = this.pools.get(tunnelId);
    if (!pool) this.pools.set(tunnelId, pool = new RelayPool(poolSize, () => this.openUpstream(tunnelId)));
    return pool.take();
  }

  /** A CONNECT stream the agent joined to the tunnel's upstream; fails when the agent could not reach it. */
  private openUpstream(tunnelId: string): Promise<ClientHttp2Stream> {
    return upstreamReached(this.openTcp(tunnelId), OPEN_TIMEOUT_MS);
  }

  /** A raw TCP stream to a tunnel's upstream (an HTTP/2 CONNECT stream; WebSockets ride on these too). */
  openTcp(tunnelId: string, client = ''): ClientHttp2Stream {
    this.refuseWhileResetting(client);
    return this.resets.paced(this.h2.request({ ':method': 'CONNECT', ':authority': 'upstream:0', [TUNNEL_HEADER]: tunnelId }, WITH_BODY), client);
  }

  /**
   * Too many cancelled streams still wait for their reset: new ones would only add to them.
   * Counted per client address (its key) first, so the client that cancels is the one refused.
   */
  private refuseWhileResetting(client: string) {
    this.refuseClient(client);
    if (this.resets.backlog >= this.resets.pace.waiting) throw new ApiError('ERR_SERVICE_752', `the agent's connection has ${this.resets.backlog} cancelled requests still to close; retry in a few seconds`);
  }

  private refuseClient(client: string) {
    const mine = client ? this.resets.backlogOf(client) : 0;
    if (mine >= this.resets.pace.waitingPerClient) throw new ApiError('ERR_SERVICE_752', `this client address has ${mine} cancelled requests through this agent still to close; retry in a few seconds`);
  }

  /** Pushes a file body (the agent bundle) to the agent; resolves with the agent's status. */
  push(path: string, headers: Record<string, string>, body: Buffer, timeoutMs: number): Promise<ControlReply> {
    return new Promise((resolve, reject) => {
      const stream = this.h2.request({ ':method': 'POST', ':path': path, ...headers });
      const timer = setTimeout(() => { stream.close(http2.constants.NGHTTP2_CANCEL); reject(new TimeoutError('push timed out')); }, timeoutMs);
      let status = 0;
      stream.on('response', (h) => { status = Number(h[':status']); });
      stream.resume();
      stream.on('end', () => { clearTimeout(timer); resolve({ status, body: undefined }); });
      stream.on('error', (e) => { clearTimeout(timer); reject(e); });
      stream.end(body);
    });
  }
}
