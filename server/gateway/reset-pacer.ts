// Cancelling relayed streams without closing the agent's session. The agent is the HTTP/2
// server of its connection, and its nghttp2 (Node 20 cannot change this) ends a session that
// receives RST_STREAM faster than 1,000 at once and 33 a second after that: clients who cancel
// their requests by the thousand (HTTP/2 rapid reset) would otherwise take the tunnel offline
// for every client. Resets are paced below that limit; a stream over the pace is read and its
// data dropped until its turn, and one that ends on its own meanwhile needs no reset at all.
import { constants, type ClientHttp2Stream } from 'node:http2';

/** Below nghttp2's defaults (burst 1,000, 33 a second), with a margin. */
export const RESET_BURST = 800;
export const RESET_RATE = 25;
/** Streams waiting to be reset at most; past it the connection takes no new streams (ERR_SERVICE_752). */
export const MAX_WAITING_RESETS = 1000;

export class ResetPacer {
  private tokens = RESET_BURST;
  private at = Date.now();
  /** Streams waiting for their reset, each with the destroy() that ends it. */
  private waiting = new Map<ClientHttp2Stream, () => void>();
  private timer?: NodeJS.Timeout;

  /** @param ended whether the session is closing or gone (then nothing waits). */
  constructor(private ended: () => boolean) {}

  get backlog() { return this.waiting.size; }

  /** Routes the stream's close(code) and destroy() through the pace. */
  pace(stream: ClientHttp2Stream): ClientHttp2Stream {
    const close = stream.close.bind(stream);
    const destroy = stream.destroy.bind(stream);
    const later = (err?: Error) => () => {
      if (!stream.closed) close(constants.NGHTTP2_CANCEL);
      destroy(err);
    };
    stream.close = ((code?: number, cb?: () => void) => {
      if (this.now(stream)) return close(code, cb);
      if (cb) stream.once('close', cb);
      this.wait(stream, later());
    }) as typeof stream.close;
    stream.destroy = ((err?: Error) => {
      if (this.now(stream)) destroy(err);
      else this.wait(stream, later(err));
      return stream;
    }) as typeof stream.destroy;
    return stream;
  }

  /** Whether a close or destroy may go now: it sends no reset, or a token is left. */
  private now(stream: ClientHttp2Stream): boolean {
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

  private wait(stream: ClientHttp2Stream, act: () => void) {
    if (this.waiting.has(stream)) return;
    this.waiting.set(stream, act);
    // Its data is dropped, so its flow-control window keeps open and it may end on its own.
    stream.resume();
    this.schedule();
  }

  private settle(stream: ClientHttp2Stream) {
    const act = this.waiting.get(stream);
    if (!act) return;
    this.waiting.delete(stream);
    act();
  }

  private take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(RESET_BURST, this.tokens + ((now - this.at) / 1000) * RESET_RATE);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private schedule() {
    if (this.timer) return;
    this.timer = setInterval(() => {
      for (const [stream] of this.waiting) if (stream.closed || this.ended() || this.take()) this.settle(stream);
      if (!this.waiting.size) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    }, Math.ceil(1000 / RESET_RATE));
    this.timer.unref();
  }
}
