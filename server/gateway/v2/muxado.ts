// A muxado session over one TLS connection (the server's side): streams as Node Duplexes with
// the protocol's per-stream flow control both ways (256 KiB windows; a window is given back
// only as the reader takes the bytes, so one stream holds at most its window plus its
// reader's buffer), and hostile input bounded: frame sizes, streams the peer may open, a peer
// that overruns a window, frames on streams that do not exist. Any breach closes the session
// with the reason given to `onClose` (the caller logs it). Server streams are even, the
// agent's odd (its first is 3).
import { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { CODE, FLAG, header, invalidHeader, MAX_WRITE_FRAME, readHeader, TYPE, u32, WINDOW } from './frames.js';

export interface MuxLimits {
  /** Streams open at once, both sides together (the Rust SDK's session dies past 512). */
  maxStreams: number;
  /** Streams the agent may have open at once (RPCs and its heartbeat: a handful); past it, RST refused. */
  maxPeerStreams: number;
}

export const MUX_LIMITS: MuxLimits = { maxStreams: 480, maxPeerStreams: 64 };

export class MuxStream extends Duplex {
  /** Bytes the peer may still send before a WNDINC (what this side allowed). */
  private recvWindow = WINDOW;
  /** Bytes received and read by nobody yet: given back to the peer once the reader wants more. */
  private owed = 0;
  /** Bytes this side may still send. */
  private sendWindow = WINDOW;
  private pending?: { chunk: Buffer; cb: (e?: Error | null) => void };
  private synSent: boolean;
  localEnded = false;
  remoteEnded = false;
  private reset = false;

  constructor(readonly id: number, private readonly mux: MuxSession, opened: 'local' | 'remote') {
    super({ allowHalfOpen: true, highWaterMark: 64 * 1024 });
    this.synSent = opened === 'remote';
  }

  /** Payload from the peer. False: it overran the window. */
  received(data: Buffer): boolean {
    if (data.length > this.recvWindow) return false;
    if (this.remoteEnded) return true;
    this.recvWindow -= data.length;
    this.owed += data.length;
    if (this.push(data)) this.giveBack();
    return true;
  }

  private giveBack() {
    if (!this.owed || this.reset) return;
    this.mux.send(header(TYPE.WNDINC, 0, this.id, 4), u32(this.owed));
    this.recvWindow += this.owed;
    this.owed = 0;
  }

  remoteFin() {
    if (this.remoteEnded) return;
    this.remoteEnded = true;
    this.push(null);
    this.mux.maybeForget(this);
  }

  remoteReset(code: number) {
    this.reset = true;
    this.remoteEnded = this.localEnded = true;
    this.mux.forget(this);
    failStream(this, new Error(`the agent reset stream ${this.id} (code ${code})`));
  }

  windowIncrement(n: number): boolean {
    if (n <= 0 || this.sendWindow + n > 2 ** 31) return false;
    this.sendWindow += n;
    const p = this.pending;
    if (p) {
      this.pending = undefined;
      this._write(p.chunk, 'binary', p.cb);
    }
    return true;
  }

  override _read() {
    this.giveBack();
  }

  private flags() {
    if (this.synSent) return 0;
    this.synSent = true;
    return FLAG.SYN;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void) {
    if (this.reset || this.mux.closed) return cb(new Error('the stream is closed'));
    let offset = 0;
    let ok = true;
    while (offset < chunk.length && this.sendWindow > 0) {
      const n = Math.min(chunk.length - offset, this.sendWindow, MAX_WRITE_FRAME);
      ok = this.mux.send(header(TYPE.DATA, this.flags(), this.id, n), chunk.subarray(offset, offset + n));
      this.sendWindow -= n;
      offset += n;
    }
    if (offset < chunk.length) {
      this.pending = { chunk: chunk.subarray(offset), cb };
      return;
    }
    if (ok) cb();
    else this.mux.onDrain(() => cb());
  }

  override _final(cb: (e?: Error | null) => void) {
    if (!this.reset && !this.mux.closed) this.mux.send(header(TYPE.DATA, FLAG.FIN | this.flags(), this.id, 0));
    this.localEnded = true;
    this.mux.maybeForget(this);
    cb();
  }

  override _destroy(err: Error | null, cb: (e?: Error | null) => void) {
    if (!this.reset && !(this.localEnded && this.remoteEnded)) {
      this.reset = true;
      if (!this.mux.closed && this.synSent) this.mux.send(header(TYPE.RST, 0, this.id, 4), u32(CODE.STREAM_CANCELLED));
    }
    this.pending?.cb(new Error('the stream was closed'));
    this.pending = undefined;
    this.mux.forget(this);
    cb(err);
  }

  /** As an HTTP/2 stream is cancelled (the ingress's relays call this). */
  close() {
    this.destroy();
  }
}

export class MuxSession {
  private streams = new Map<number, MuxStream>();
  private peerOpen = 0;
  private nextLocal = 2;
  private lastRemote = 1;
  private buf: Buffer = Buffer.alloc(0);
  closed = false;
  /** When any frame last arrived (liveness). */
  lastFrameAt = Date.now();
  private drains: (() => void)[] = [];
  private corked = false;

  constructor(
    readonly socket: TLSSocket,
    private readonly limits: MuxLimits,
    private readonly accept: (stream: MuxStream) => void,
    private readonly onClose: (reason: string) => void,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('drain', () => {
      const waiting = this.drains.splice(0);
      for (const f of waiting) f();
    });
    socket.on('error', () => {});
    socket.on('end', () => this.close('the agent closed the connection'));
    socket.on('close', () => this.close('the connection closed'));
  }

  get streamCount() { return this.streams.size; }

  /** One frame (its header and body) to the socket; frames of one tick go in one write. */
  send(...parts: Buffer[]): boolean {
    if (this.closed) return false;
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(() => {
        this.corked = false;
        this.socket.uncork();
      });
    }
    let ok = true;
    for (const p of parts) ok = this.socket.write(p);
    return ok && this.socket.writableLength < 1024 * 1024;
  }

  onDrain(f: () => void) {
    if (this.closed) return f();
    this.drains.push(f);
  }

  /** A new stream from this side (a proxied connection, a command); throws past the stream cap. */
  open(): MuxStream {
    if (this.closed) throw new Error('the agent connection is closed');
    if (this.streams.size >= this.limits.maxStreams) throw new StreamsExhausted(this.limits.maxStreams);
    const s = new MuxStream(this.nextLocal, this, 'local');
    this.nextLocal += 2;
    this.streams.set(s.id, s);
    return s;
  }

  forget(s: MuxStream) {
    if (this.streams.get(s.id) !== s) return;
    this.streams.delete(s.id);
    if (s.id % 2 === 1) this.peerOpen--;
  }

  maybeForget(s: MuxStream) {
    if (s.localEnded && s.remoteEnded) this.forget(s);
  }

  /** Ends the session: GOAWAY (with its text), then the connection, a moment later. */
  goAway(code: number, message: string) {
    if (this.closed) return;
    const text = Buffer.from(message);
    this.send(header(TYPE.GOAWAY, 0, 0, 8 + text.length), u32(this.lastRemote), u32(code), text);
    this.close(message);
    setTimeout(() => this.socket.destroy(), 100).unref();
  }

  close(reason: string) {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.streams.values()) failStream(s, new Error(`the agent connection closed: ${reason}`));
    this.streams.clear();
    const waiting = this.drains.splice(0);
    for (const f of waiting) f();
    this.onClose(reason);
    if (!this.socket.destroyed) this.socket.end();
    setTimeout(() => this.socket.destroy(), 1000).unref();
  }

  private fail(code: number, reason: string) {
    this.goAway(code, reason);
  }

  private onData(d: Buffer) {
    if (this.closed) return;
    this.lastFrameAt = Date.now();
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    let at = 0;
    while (!this.closed && this.buf.length - at >= 8) {
      const h = readHeader(this.buf, at);
      const bad = invalidHeader(h);
      if (bad) return this.fail(h.type > 3 ? CODE.PROTOCOL : CODE.FRAME_SIZE, bad);
      if (this.buf.length - at - 8 < h.length) break;
      const body = this.buf.subarray(at + 8, at + 8 + h.length);
      at += 8 + h.length;
      this.frame(h.type, h.flags, h.streamId, body);
    }
    this.buf = at >= this.buf.length ? Buffer.alloc(0) : Buffer.from(this.buf.subarray(at));
  }

  private frame(type: number, flags: number, id: number, body: Buffer) {
    switch (type) {
      case TYPE.GOAWAY:
        return this.close(`the agent sent GOAWAY (code ${body.readUInt32BE(4)})`);
      case TYPE.RST:
        return this.streams.get(id)?.remoteReset(body.readUInt32BE(0));
      case TYPE.WNDINC: {
        const s = this.streams.get(id);
        if (s && !s.windowIncrement(body.readUInt32BE(0) & 0x7fffffff)) this.fail(CODE.FLOW_CONTROL, `the agent's window increment on stream ${id} is invalid`);
        return;
      }
    }
    let s = this.streams.get(id);
    if (flags & FLAG.SYN) {
      if (s || id % 2 !== 1 || id <= this.lastRemote) return this.fail(CODE.PROTOCOL, `the agent opened stream ${id}, which is not a new odd id`);
      this.lastRemote = id;
      if (this.peerOpen >= this.limits.maxPeerStreams || this.streams.size >= this.limits.maxStreams) {
        this.send(header(TYPE.RST, 0, id, 4), u32(CODE.STREAM_REFUSED));
        return;
      }
      s = new MuxStream(id, this, 'remote');
      this.streams.set(id, s);
      this.peerOpen++;
      this.accept(s);
    }
    if (!s) {
      // A stream already closed here (or never opened): its data is dropped, once answered.
      if (body.length || !(flags & FLAG.FIN)) this.send(header(TYPE.RST, 0, id, 4), u32(CODE.STREAM_CLOSED));
      return;
    }
    if (body.length && !s.received(Buffer.from(body))) return this.fail(CODE.FLOW_CONTROL, `the agent sent more than the ${WINDOW}-byte window on stream ${id}`);
    if (flags & FLAG.FIN) s.remoteFin();
  }
}

export class StreamsExhausted extends Error {
  constructor(readonly max: number) { super(`the agent's connection has ${max} streams open, as many as it may`); }
}

/**
 * Destroys a stream with an error its reader sees, if it has one. A stream nobody listens to
 * any more (an HTTP client lets go of its connection once the answer is read) would otherwise
 * throw the error out of the event loop: an uncaught exception, the whole server down.
 */
export function failStream(s: Duplex, err: Error) {
  if (s.listenerCount('error') === 0) s.on('error', () => {});
  s.destroy(err);
}
