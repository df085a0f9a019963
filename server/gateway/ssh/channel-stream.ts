// A forwarded-tcpip channel to an `ssh -R` client, as the ingress's relays take a stream to an
// agent: returned at once (the relays are synchronous), connected when the client accepts the
// channel. Until then what is written waits in the stream's own buffer (its write callback is
// held, so a writer sees backpressure, not an unbounded queue). `response` (status 200) is
// emitted when the channel opens, as a CONNECT stream whose agent reached its upstream; a
// refused channel destroys the stream with the client's reason.
import { Duplex } from 'node:stream';
import { failStream } from '../v2/muxado.js';

/** What ssh2 gives for a channel: a duplex. */
type Channel = Duplex;

export type OpenChannel = (cb: (err: Error | undefined, channel?: Channel) => void) => void;

export class ChannelStream extends Duplex {
  private channel?: Channel;
  private pending?: { chunk: Buffer; cb: (e?: Error | null) => void };
  private finishing?: (e?: Error | null) => void;

  constructor(open: OpenChannel) {
    super({ allowHalfOpen: true });
    open((err, channel) => {
      if (this.destroyed) return void channel?.destroy();
      if (err || !channel) return void failStream(this, err ?? new Error('the ssh client refused the channel'));
      this.attach(channel);
    });
  }

  private attach(channel: Channel) {
    this.channel = channel;
    channel.on('data', (c: Buffer) => {
      if (!this.push(c)) channel.pause();
    });
    let ended = false;
    channel.on('end', () => {
      ended = true;
      this.push(null);
    });
    channel.on('error', (e: Error) => failStream(this, e));
    channel.on('close', () => {
      // A channel closed before its end: the answer was cut short, and the reader must see it.
      if (!ended) failStream(this, new Error('the ssh client closed the channel'));
    });
    this.emit('response', { ':status': 200 });
    const p = this.pending;
    this.pending = undefined;
    if (p) this._write(p.chunk, 'binary', p.cb);
    if (this.finishing) this._final(this.finishing);
  }

  override _read() {
    this.channel?.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void) {
    const ch = this.channel;
    if (!ch) {
      this.pending = { chunk, cb };
      return;
    }
    if (ch.write(chunk)) cb();
    else ch.once('drain', () => cb());
  }

  override _final(cb: (e?: Error | null) => void) {
    if (!this.channel) {
      this.finishing = cb;
      return;
    }
    this.finishing = undefined;
    this.channel.end();
    cb();
  }

  override _destroy(err: Error | null, cb: (e?: Error | null) => void) {
    this.channel?.destroy();
    cb(err);
  }

  /** The relays close agent streams with an HTTP/2 code; here it only ends the channel. */
  close() {
    this.destroy();
  }
}
