// Pure parts of two route modules: compression's choice of encoding, and the WebSocket frame
// codec the websocket_tcp_converter uses.
import { describe, expect, it, vi } from 'vitest';
import { chooseEncoding } from '../../server/ingress/modules/compression.js';
import { acceptKey, encodeFrame, FrameDecoder, MAX_FRAME, OP } from '../../server/ingress/modules/websocket-frames.js';

describe('chooseEncoding', () => {
  it.each([
    ['no header: none', undefined, undefined],
    ['gzip only', 'gzip', 'gzip'],
    ['br preferred on a tie', 'gzip, deflate, br', 'br'],
    ['a higher q wins', 'br;q=0.5, gzip;q=0.9', 'gzip'],
    ['q=0 refuses an encoding', 'br;q=0, gzip', 'gzip'],
    ['identity only: none', 'identity', undefined],
    ['* covers both', '*', 'br'],
    ['deflate only is not offered', 'deflate', undefined],
  ])('%s', (_why, header, want) => {
    expect(chooseEncoding(header)).toBe(want);
  });
});

/** A client frame: masked, as RFC 6455 requires of clients. */
function clientFrame(opcode: number, payload: Buffer): Buffer {
  const f = encodeFrame(opcode, payload);
  const at = f[1] === 126 ? 4 : f[1] === 127 ? 10 : 2;
  const mask = Buffer.from([1, 2, 3, 4]);
  const body = Buffer.from(payload).map((b, i) => b ^ mask[i & 3]);
  const head = Buffer.from(f.subarray(0, at));
  head[1] |= 0x80;
  return Buffer.concat([head, mask, Buffer.from(body)]);
}

describe('WebSocket frames', () => {
  it('the handshake accept value of RFC 6455 section 1.3', () => {
    expect(acceptKey('dGhlIHNhbXBsZSBub25jZQ==')).toBe('s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
  });

  it('decodes masked frames split anywhere, of each length form, and control frames', () => {
    const got: string[] = [];
    const events = { data: (p: Buffer) => got.push(`data:${p.length}:${p.subarray(0, 3).toString()}`), ping: (p: Buffer) => got.push(`ping:${p}`), close: (c: number) => got.push(`close:${c}`) };
    const d = new FrameDecoder(events);
    const bytes = Buffer.concat([
      clientFrame(OP.text, Buffer.from('abc')),
      clientFrame(OP.binary, Buffer.alloc(300, 'x')),
      clientFrame(OP.binary, Buffer.alloc(70_000, 'y')),
      clientFrame(OP.ping, Buffer.from('hi')),
      clientFrame(OP.close, Buffer.from([0x03, 0xe8])),
    ]);
    for (let i = 0; i < bytes.length; i += 997) d.push(bytes.subarray(i, i + 997));
    expect(got).toEqual(['data:3:abc', 'data:300:xxx', 'data:70000:yyy', 'ping:hi', 'close:1000']);
  });

  it('an unmasked client frame closes with 1002; a frame over the limit with 1009', () => {
    const closes: number[] = [];
    const events = { data: () => {}, ping: () => {}, close: (c: number) => closes.push(c) };
    expect(new FrameDecoder(events).push(encodeFrame(OP.binary, Buffer.from('x')))).toBe(false);
    const huge = Buffer.alloc(10);
    huge[0] = 0x82; huge[1] = 0x80 | 127; huge.writeBigUInt64BE(BigInt(MAX_FRAME + 1), 2);
    expect(new FrameDecoder(events).push(huge)).toBe(false);
    expect(closes).toEqual([1002, 1009]);
  });

  it('a large frame in small chunks is joined once, not copied again with each chunk', () => {
    const frame = clientFrame(OP.binary, Buffer.alloc(MAX_FRAME, 'z'));
    const got: number[] = [];
    const d = new FrameDecoder({ data: (p) => got.push(p.length), ping: () => {}, close: () => {} });
    let copied = 0;
    const concat = Buffer.concat;
    const spy = vi.spyOn(Buffer, 'concat').mockImplementation((list, total) => {
      const out = concat(list, total);
      copied += out.length;
      return out;
    });
    try {
      // Byte by byte for the header, then 16 KiB chunks.
      for (let i = 0; i < 14; i++) d.push(frame.subarray(i, i + 1));
      for (let i = 14; i < frame.length; i += 16_384) d.push(frame.subarray(i, i + 16_384));
    } finally {
      spy.mockRestore();
    }
    expect(got).toEqual([MAX_FRAME]);
    expect(copied).toBeLessThan(2 * frame.length);
  });

  it('a control frame over 125 bytes closes with 1002 (a ping may not ask for a large pong)', () => {
    const closes: number[] = [];
    const pings: number[] = [];
    const d = new FrameDecoder({ data: () => {}, ping: (p) => pings.push(p.length), close: (c) => closes.push(c) });
    expect(d.push(clientFrame(OP.ping, Buffer.alloc(125)))).toBe(true);
    expect(d.push(clientFrame(OP.ping, Buffer.alloc(126)))).toBe(false);
    expect({ pings, closes }).toEqual({ pings: [125], closes: [1002] });
  });
});
