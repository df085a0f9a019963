// The version-2 protocol's typed streams (the first 4 bytes of a stream, big-endian) and the
// shapes of its answers. Answers use the exact key spellings the SDKs decode (PascalCase; the
// Rust SDK matches case-sensitively); requests are read with lower-cased keys (json.ts).
import type { MuxStream } from './muxado.js';

export const STREAM_TYPE = {
  AUTH: 0, BIND: 1, UNBIND: 2, PROXY: 3, RESTART: 4, STOP: 5, UPDATE: 6, START_TUNNEL_WITH_LABEL: 7,
  SRV_INFO: 8, STOP_TUNNEL: 9, PATCH_TUNNEL_STATE: 10, HEARTBEAT: 0xffffffff,
} as const;

/** An error as the SDKs show it: the message, a blank line, the code on a line of its own. */
export const errorText = (code: string, msg: string) => `${msg}\n\n${code}\n`;

/** Writes one JSON answer and the FIN in one go (the Rust SDK reads an answer to its end). */
export function answer(stream: MuxStream, body: unknown) {
  if (stream.destroyed || stream.writableEnded) return;
  stream.end(Buffer.from(JSON.stringify(body)));
}

/** Reads a stream's 4-byte type, within `timeoutMs`. */
export function readType(stream: MuxStream, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const done = (e?: Error, t?: number) => {
      clearTimeout(timer);
      stream.off('readable', onReadable);
      stream.off('close', onClose);
      if (e) reject(e);
      else resolve(t!);
    };
    const onReadable = () => {
      const b = stream.read(4) as Buffer | null;
      if (b) done(undefined, b.readUInt32BE(0));
    };
    const onClose = () => done(new Error('the stream closed before its type'));
    const timer = setTimeout(() => done(new Error(`no stream type within ${timeoutMs} ms`)), timeoutMs);
    stream.on('readable', onReadable);
    stream.on('close', onClose);
    onReadable();
  });
}
