// muxado frames, the multiplexer under the version-2 agent protocol (docs/agents.md): an 8-byte
// header (24-bit length, 4-bit type, 4-bit flags, 32-bit stream id, big-endian) and a body.
// Read and bounded here; nothing larger than a frame's cap is ever buffered.

export const TYPE = { RST: 0, DATA: 1, WNDINC: 2, GOAWAY: 3 } as const;
export const FLAG = { FIN: 0x1, SYN: 0x2 } as const;

/** Error codes carried by RST and GOAWAY. */
export const CODE = {
  NO_ERROR: 0x0, PROTOCOL: 0x1, INTERNAL: 0x2, FLOW_CONTROL: 0x3, STREAM_CLOSED: 0x4, STREAM_REFUSED: 0x5,
  STREAM_CANCELLED: 0x6, FRAME_SIZE: 0x8, ENHANCE_YOUR_CALM: 0xa,
} as const;

/** A stream's window in both directions: fixed by the protocol, never negotiated. */
export const WINDOW = 256 * 1024;
/** A GOAWAY's body at most (8 fixed bytes and its debug text). */
export const MAX_GOAWAY = 64 * 1024;
/** DATA payload per frame this side writes. */
export const MAX_WRITE_FRAME = 64 * 1024;

export interface FrameHeader { length: number; type: number; flags: number; streamId: number }

export function header(type: number, flags: number, streamId: number, length: number): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeUIntBE(length, 0, 3);
  b[3] = (type << 4) | flags;
  b.writeUInt32BE(streamId & 0x7fffffff, 4);
  return b;
}

export function readHeader(b: Buffer, at: number): FrameHeader {
  return { length: b.readUIntBE(at, 3), type: b[at + 3] >> 4, flags: b[at + 3] & 0xf, streamId: b.readUInt32BE(at + 4) & 0x7fffffff };
}

/** Why a header is refused before its body is read (the session is then closed), or undefined. */
export function invalidHeader(h: FrameHeader): string | undefined {
  switch (h.type) {
    case TYPE.RST:
    case TYPE.WNDINC:
      if (h.streamId === 0 || h.length !== 4) return `a ${h.type === TYPE.RST ? 'RST' : 'WNDINC'} frame needs a stream and a 4-byte body (stream ${h.streamId}, ${h.length} bytes)`;
      return undefined;
    case TYPE.DATA:
      if (h.streamId === 0) return 'a DATA frame on stream 0';
      if (h.length > WINDOW) return `a DATA frame of ${h.length} bytes, over the ${WINDOW}-byte stream window`;
      return undefined;
    case TYPE.GOAWAY:
      if (h.streamId !== 0 || h.length < 8 || h.length > MAX_GOAWAY) return `a GOAWAY frame of ${h.length} bytes on stream ${h.streamId} (stream 0, 8 to ${MAX_GOAWAY} bytes)`;
      return undefined;
    default:
      return `an unknown frame type ${h.type}`;
  }
}

export function u32(n: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
}
