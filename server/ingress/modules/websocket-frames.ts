// The part of RFC 6455 the websocket_tcp_converter needs: the handshake's accept value, a
// decoder of client frames (masked) into payload bytes and control events, and the encoder
// of server frames (unmasked). Frames over MAX_FRAME close the connection (1009): a partial
// frame is held until it is whole, so MAX_FRAME is what one connection can make the edge hold.
import { createHash } from 'node:crypto';

export const MAX_FRAME = 1024 * 1024;
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

export const acceptKey = (key: string) => createHash('sha1').update(key + GUID).digest('base64');

export const OP = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

export function encodeFrame(opcode: number, payload: Buffer): Buffer {
  const len = payload.length;
  const head = len < 126 ? Buffer.alloc(2) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | opcode;
  if (len < 126) head[1] = len;
  else if (len < 65536) { head[1] = 126; head.writeUInt16BE(len, 2); }
  else { head[1] = 127; head.writeBigUInt64BE(BigInt(len), 2); }
  return Buffer.concat([head, payload]);
}

export interface FrameEvents {
  data(payload: Buffer): void;
  ping(payload: Buffer): void;
  close(code: number): void;
}

/** Feeds bytes from the client; calls back per frame. Returns false once the stream must close. */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);
  /** Chunks received since `buf`, joined only once `need` bytes are there: a large frame arriving
   * in small chunks is copied once, not once per chunk (which made one 16 MiB frame cost
   * gigabytes of copying). */
  private parts: Buffer[] = [];
  private held = 0;
  private need = 2;
  constructor(private on: FrameEvents) {}

  /** Bytes held for a frame not yet whole. */
  get buffered(): number { return this.buf.length + this.held; }

  push(chunk: Buffer): boolean {
    this.parts.push(chunk);
    this.held += chunk.length;
    if (this.buf.length + this.held < this.need) return true;
    this.buf = Buffer.concat([this.buf, ...this.parts]);
    this.parts = [];
    this.held = 0;
    this.need = 2;
    for (;;) {
      if (this.buf.length < 2) return true;
      const opcode = this.buf[0] & 0x0f;
      const masked = (this.buf[1] & 0x80) !== 0;
      let len = this.buf[1] & 0x7f;
      let at = 2;
      if (len === 126) { if (this.buf.length < 4) { this.need = 4; return true; } len = this.buf.readUInt16BE(2); at = 4; }
      else if (len === 127) {
        if (this.buf.length < 10) { this.need = 10; return true; }
        const big = this.buf.readBigUInt64BE(2);
        if (big > BigInt(MAX_FRAME)) { this.on.close(1009); return false; }
        len = Number(big); at = 10;
      }
      if (len > MAX_FRAME) { this.on.close(1009); return false; }
      // RFC 6455 5.5: control frames carry at most 125 bytes (a pong echoes a ping's payload).
      if (opcode >= 8 && len > 125) { this.on.close(1002); return false; }
      // RFC 6455 5.1: a client's frames are masked; an unmasked one ends the connection.
      if (!masked) { this.on.close(1002); return false; }
      if (this.buf.length < at + 4 + len) { this.need = at + 4 + len; return true; }
      const mask = this.buf.subarray(at, at + 4);
      const payload = Buffer.from(this.buf.subarray(at + 4, at + 4 + len));
      for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
      this.buf = this.buf.subarray(at + 4 + len);
      if (opcode === OP.close) { this.on.close(payload.length >= 2 ? payload.readUInt16BE(0) : 1000); return false; }
      if (opcode === OP.ping) this.on.ping(payload);
      else if (opcode === OP.text || opcode === OP.binary || opcode === OP.continuation) { if (payload.length) this.on.data(payload); }
    }
  }
}
