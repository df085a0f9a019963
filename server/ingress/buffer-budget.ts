// What clients can make the edge hold in memory, bounded per connection and per server.
//
// BufferBudget: bytes the edge buffers *from* clients before it can act on them, request bodies a
// module reads whole (webhook_verification, the saml callback's form) and the partial frame a
// websocket_tcp_converter connection is receiving. Each connection may hold `perConnection`,
// the server `max` (`--ingress-buffer-mib`); a request past either is refused (429 or 503), a
// converter connection closed (1013).
//
// UnreadAnswers: bytes held *for* clients that do not read, relayed answers waiting in the
// stream from the agent (up to its HTTP/2 window, RELAY_WINDOW) and in the client's response.
// A sweep adds them up per client connection every SWEEP_MS: a connection holding over
// UNREAD_PER_CONNECTION is closed, and while the server holds over `max` (`--ingress-unread-mib`)
// the connections holding most are closed first.
import type { Readable } from 'node:stream';

const MiB = 1024 * 1024;

/** The default of `--ingress-buffer-mib`. */
export const DEFAULT_BUFFER_MIB = 256;
/** Request bodies (and partial WebSocket frames) one client connection may have buffered at the edge at once. */
export const BUFFER_PER_CONNECTION = 16 * MiB;
/** The default of `--ingress-unread-mib`. */
export const DEFAULT_UNREAD_MIB = 256;
/** Answers one client connection may leave unread before it is closed. */
export const UNREAD_PER_CONNECTION = 32 * MiB;
/** How often the unread answers are added up. */
export const SWEEP_MS = 250;

export type Refusal = 'connection' | 'server';

export class BufferBudget {
  private used = 0;
  private byConnection = new WeakMap<object, number>();

  /** `max` 0: no server-wide bound (the per-connection one still holds). */
  constructor(readonly max: number, readonly perConnection = BUFFER_PER_CONNECTION) {}

  get held() { return this.used; }

  /** Takes `n` bytes for `connection`: undefined when taken, else which bound refused them (nothing is taken then). */
  take(connection: object, n: number): Refusal | undefined {
    const mine = this.byConnection.get(connection) ?? 0;
    if (mine + n > this.perConnection) return 'connection';
    if (this.max > 0 && this.used + n > this.max) return 'server';
    this.byConnection.set(connection, mine + n);
    this.used += n;
    return undefined;
  }

  give(connection: object, n: number) {
    if (n <= 0) return;
    const mine = this.byConnection.get(connection) ?? 0;
    this.byConnection.set(connection, Math.max(0, mine - n));
    this.used = Math.max(0, this.used - n);
  }
}

/** What a relayed answer holds in memory: its source's buffer, and what the source says it holds behind it (a pooled answer's connection). */
export const HELD = Symbol('edgeform.held');
export type HoldingSource = Readable & { [HELD]?: () => number };

interface Unread {
  source: HoldingSource;
  /** The client's side: the stream (HTTP/2) or socket (HTTP/1.1) the answer is written to. */
  out: { writableLength: number };
  /** The client's connection (an HTTP/2 session, or an HTTP/1.1 socket) and how to close it. */
  connection: object;
  close: () => void;
}

export class UnreadAnswers {
  private answers = new Set<Unread>();
  private sweeper?: NodeJS.Timeout;
  /** Connections closed for holding too much (for tests and the log). */
  closed = 0;

  /** `max` 0: no server-wide bound (the per-connection one still holds). */
  constructor(readonly max: number, readonly perConnection = UNREAD_PER_CONNECTION, private log?: (f: Record<string, unknown>) => void) {}

  /** Tracks a streamed answer until the returned function is called (its end). */
  track(u: Unread): () => void {
    this.answers.add(u);
    if (!this.sweeper) {
      this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
      this.sweeper.unref();
    }
    return () => {
      this.answers.delete(u);
      if (!this.answers.size && this.sweeper) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    };
  }

  /** Bytes held now, per client connection (each with how to close it). */
  holding(): Map<object, { bytes: number; close: () => void }> {
    const per = new Map<object, { bytes: number; close: () => void }>();
    for (const u of this.answers) {
      const bytes = u.source.readableLength + (u.source[HELD]?.() ?? 0) + u.out.writableLength;
      const c = per.get(u.connection);
      if (c) c.bytes += bytes;
      else per.set(u.connection, { bytes, close: u.close });
    }
    return per;
  }

  sweep() {
    const per = this.holding();
    let total = 0;
    for (const [conn, c] of per) {
      if (c.bytes > this.perConnection) {
        this.shut(c, 'connection');
        per.delete(conn);
      } else total += c.bytes;
    }
    if (this.max <= 0 || total <= this.max) return;
    for (const c of [...per.values()].sort((a, b) => b.bytes - a.bytes)) {
      if (total <= this.max) break;
      total -= c.bytes;
      this.shut(c, 'server');
    }
  }

  private shut(c: { bytes: number; close: () => void }, bound: Refusal) {
    this.closed++;
    this.log?.({ level: 'warn', msg: 'ingress: closed a client connection that does not read its answers', held_bytes: c.bytes, bound });
    c.close();
  }
}
