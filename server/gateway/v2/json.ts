// One JSON value per RPC stream: the SDKs write it without a length, a delimiter or a FIN, so
// its end is found by scanning (depth, strings, escapes), bounded in bytes and in time. Keys
// are matched case-insensitively (the SDKs spell them differently: AuthToken, Authtoken), and
// an object with two spellings of one key is refused rather than read one way or the other.
import type { Readable } from 'node:stream';

/** An RPC message at most, like edgeform's own agent's control bodies. */
export const MAX_MESSAGE = 256 * 1024;

export class MessageError extends Error {}

/** Reads the first JSON value of `stream` (whatever follows it stays unread). */
export function readJson(stream: Readable, timeoutMs: number, max = MAX_MESSAGE): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let depth = 0;
    let started = false;
    let inString = false;
    let escaped = false;
    const done = (e: Error | undefined, v?: unknown) => {
      clearTimeout(timer);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onEnd);
      if (e) reject(e);
      else resolve(v);
    };
    const timer = setTimeout(() => done(new MessageError(`no whole message within ${timeoutMs} ms`)), timeoutMs);
    const onError = (e: Error) => done(e);
    const onEnd = () => done(new MessageError('the stream ended before a whole JSON message'));
    const onData = (c: Buffer) => {
      for (let i = 0; i < c.length; i++) {
        const b = c[i];
        if (!started) {
          if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) continue;
          if (b !== 0x7b && b !== 0x5b) return done(new MessageError('the message is not a JSON object'));
          started = true;
          depth = 1;
          continue;
        }
        if (inString) {
          if (escaped) escaped = false;
          else if (b === 0x5c) escaped = true;
          else if (b === 0x22) inString = false;
          continue;
        }
        if (b === 0x22) inString = true;
        else if (b === 0x7b || b === 0x5b) depth++;
        else if (b === 0x7d || b === 0x5d) depth--;
        if (depth === 0) {
          chunks.push(c.subarray(0, i + 1));
          const rest = c.subarray(i + 1);
          size += i + 1;
          if (size > max) return done(new MessageError(`the message is over ${max} bytes`));
          stream.pause();
          if (rest.length) stream.unshift(rest);
          try {
            return done(undefined, JSON.parse(Buffer.concat(chunks).toString('utf8')));
          } catch {
            return done(new MessageError('the message is not valid JSON'));
          }
        }
      }
      size += c.length;
      if (size > max) return done(new MessageError(`the message is over ${max} bytes`));
      chunks.push(c);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('close', onEnd);
    stream.on('error', onError);
    stream.resume();
  });
}

/** The value with every object key in lower case; throws on two spellings of one key. */
export function lowerKeys(v: unknown, depth = 0): any {
  if (depth > 32) throw new MessageError('the message nests too deep');
  if (Array.isArray(v)) return v.map((x) => lowerKeys(x, depth + 1));
  if (!v || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    const key = k.toLowerCase();
    if (Object.hasOwn(out, key)) throw new MessageError(`the message spells the key ${k} twice`);
    out[key] = lowerKeys(x, depth + 1);
  }
  return out;
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');
export { str };
