// Cancelling relayed streams without closing the agent's session. The agent is the HTTP/2
// server of its connection, and its nghttp2 (Node 20 cannot change this) ends a session that
// receives RST_STREAM faster than 1,000 at once and 33 a second after that: clients who cancel
// their requests by the thousand (HTTP/2 rapid reset) would otherwise take the tunnel offline
// for every client. Resets are paced below that limit; a stream over the pace is read and its
// data dropped until its turn, and one that ends on its own meanwhile needs no reset at all.
// The pace is the agent connection's, but the backlog is counted per client address and served
// in turn: a client cancelling by the hundred a second is refused (ERR_SERVICE_752) once its own
// share waits, while the other clients of the same agent are served.
import { constants, type ClientHttp2Stream } from 'node:http2';

/** Below nghttp2's defaults (burst 1,000, 33 a second), with a margin. */
export const RESET_BURST = 800;
export const RESET_RATE = 25;
/** Streams waiting to be reset at most; past it the connection takes no new streams (ERR_SERVICE_752). */
export const MAX_WAITING_RESETS = 1000;
/**
 * Streams of one client address (an IPv6 /64) waiting to be reset at most; past it that client's
 * new requests through this agent are refused (ERR_SERVICE_752), not everyone's: a client that
 * cancels requests by the hundred a second fills its own share, and the others' requests go on.
 */
export const MAX_WAITING_RESETS_PER_CLIENT = 100;

/** The pace and the backlog bounds (the constants above; tests make them small). */
export interface ResetPace {
  burst: number;
  rate: number;
  waiting: number;
  waitingPerClient: number;
}
export const RESET_PACE: ResetPace = { burst: RESET_BURST, rate: RESET_RATE, waiting: MAX_WAITING_RESETS, waitingPerClient: MAX_WAITING_RESETS_PER_CLIENT };

const PACER = Symbol('reset pacer');
/** The client address (its clientKey) a stream is relayed for; '' for the server's own streams. */
const CLIENT = Symbol('reset pacer client');
type Tagged = ClientHttp2Stream & { [CLIENT]?: string };

/** Says whose stream this is now (a pooled connection is opened for no one and cancelled for a client). */
export function tagClient(stream: ClientHttp2Stream, client: string) {
  (stream as Tagged)[CLIENT] = client;
}
type Paced = ClientHttp2Stream & { [PACER]: ResetPacer };
type Close = ClientHttp2Stream['close'];
type Destroy = ClientHttp2Stream['destroy'];
/** Node's own close and destroy of a client stream (from its prototype, taken on first use). */
let nodeClose: Close | undefined;
let nodeDestroy: Destroy | undefined;

/** A paced stream's close(code): now when the pace allows, else once its turn comes. */
function pacedClose(this: Paced, code?: number, cb?: () => void) {
  const pacer = this[PACER];
  if (pacer.now(this)) return nodeClose!.call(this, code, cb);
  if (cb) this.once('close', cb);
  pacer.wait(this, undefined);
}

/** A paced stream's destroy(err), likewise. */
function pacedDestroy(this: Paced, err?: Error) {
  const pacer = this[PACER];
  if (pacer.now(this)) nodeDestroy!.call(this, err);
  else pacer.wait(this, err);
  return this;
}

/** The reset that was held back: the stream is cancelled (unless it closed meanwhile) and destroyed. */
function resetNow(stream: ClientHttp2Stream, err: Error | undefined) {
  if (!stream.closed) nodeClose!.call(stream, constants.NGHTTP2_CANCEL);
  nodeDestroy!.call(stream, err);
}

export class ResetPacer {
  private tokens: number;
  private at = Date.now();
  /** Streams waiting for their reset, each with the error its destroy() was given. */
  private waiting = new Map<ClientHttp2Stream, Error | undefined>();
  /** The same streams by client address: resets are taken from each client in turn. */
  private byClient = new Map<string, Set<ClientHttp2Stream>>();
  private timer?: NodeJS.Timeout;

  /** @param ended whether the session is closing or gone (then nothing waits). */
  constructor(private ended: () => boolean, readonly pace: ResetPace = RESET_PACE) {
    this.tokens = pace.burst;
  }

  get backlog() { return this.waiting.size; }

  /** Streams of one client address waiting for their reset. */
  backlogOf(client: string) { return this.byClient.get(client)?.size ?? 0; }

  /**
   * Routes the stream's close(code) and destroy() through the pace. Shared functions, not a
   * bound pair and closures per stream: this runs for every relayed request.
   */
  paced(stream: ClientHttp2Stream, client = ''): ClientHttp2Stream {
    if (!nodeClose) {
      nodeClose = stream.close;
      nodeDestroy = stream.destroy;
    }
    (stream as Tagged)[CLIENT] = client;
    (stream as Paced)[PACER] = this;
    stream.close = pacedClose as Close;
    stream.destroy = pacedDestroy as Destroy;
    return stream;
  }

  /** Whether a close or destroy may go now: it sends no reset, or a token is left. */
  now(stream: ClientHttp2Stream): boolean {
    const free = stream.closed || stream.destroyed || this.ended();
    if (this.waiting.has(stream)) {
      // Node destroys a stream that ended on its own, and each stream of a session it closes:
      // one that was waiting ends now (without a reset, or with its session).
      if (!free) return false;
      this.settle(stream);
      return true;
    }
    return free || this.take();
  }

  /** Holds the stream's reset (with the error its destroy() got) until a token is left. */
  wait(stream: ClientHttp2Stream, err: Error | undefined) {
    if (this.waiting.has(stream)) return;
    this.waiting.set(stream, err);
    const client = (stream as Tagged)[CLIENT] ?? '';
    let mine = this.byClient.get(client);
    if (!mine) this.byClient.set(client, mine = new Set());
    mine.add(stream);
    // Its data is dropped, so its flow-control window keeps open and it may end on its own.
    stream.resume();
    this.schedule();
  }

  private settle(stream: ClientHttp2Stream) {
    if (!this.waiting.has(stream)) return;
    const err = this.waiting.get(stream);
    this.waiting.delete(stream);
    const client = (stream as Tagged)[CLIENT] ?? '';
    const mine = this.byClient.get(client);
    mine?.delete(stream);
    if (mine && !mine.size) this.byClient.delete(client);
    resetNow(stream, err);
  }

  private take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(this.pace.burst, this.tokens + ((now - this.at) / 1000) * this.pace.rate);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private schedule() {
    if (this.timer) return;
    this.timer = setInterval(() => {
      // Streams that need no reset any more go at once; then one reset per client in turn while
      // tokens last, so one client's thousand cancels do not hold back another's few.
      for (const [stream] of this.waiting) if (stream.closed || this.ended()) this.settle(stream);
      for (let more = true; more && this.waiting.size;) {
        more = false;
        for (const mine of [...this.byClient.values()]) {
          const next = mine.values().next();
          if (next.done) continue;
          if (!this.take()) return this.stopIfEmpty();
          this.settle(next.value);
          more = true;
        }
      }
      this.stopIfEmpty();
    }, Math.ceil(1000 / this.pace.rate));
    this.timer.unref();
  }

  private stopIfEmpty() {
    if (!this.waiting.size) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
