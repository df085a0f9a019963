// Reads a TLS ClientHello off a raw connection without consuming it: the server name (SNI)
// decides which edge, certificate, minimum version and client-certificate check apply, or
// whether the bytes pass through untouched to the upstream. Bounded in size and time.
import type { Socket } from 'node:net';

/** A ClientHello is a few hundred bytes; past this (or not TLS at all) the connection is closed. */
export const MAX_CLIENT_HELLO = 16_384;

export type HelloResult =
  | { ok: true; servername: string | undefined; bytes: Buffer }
  | { ok: false; reason: 'not_tls' | 'too_large' | 'timeout' | 'closed'; bytes?: Buffer };

export interface ClientHello {
  /** The server name (SNI), lower-cased; undefined when the hello names none. */
  servername: string | undefined;
  /** The ALPN protocols offered (RFC 7301), in the client's order; [] when none. */
  alpn: string[];
}

/**
 * The server name and ALPN protocols of a complete ClientHello in `buf`, `null` when more
 * bytes are needed, or an error reason. The handshake message may span TLS records.
 */
export function parseClientHello(buf: Buffer): ClientHello | null | 'not_tls' {
  // Gather the handshake bytes from consecutive handshake records (type 22).
  const parts: Buffer[] = [];
  let at = 0;
  let have = 0;
  let need = -1;
  while (need < 0 || have < need) {
    // The first byte decides (22: a handshake record), without waiting for a whole record header.
    if (buf.length > at && buf[at] !== 22) return 'not_tls';
    if (buf.length < at + 5) return null;
    if (buf[at + 1] !== 3) return 'not_tls';
    const len = buf.readUInt16BE(at + 3);
    if (buf.length < at + 5 + len) return null;
    parts.push(buf.subarray(at + 5, at + 5 + len));
    have += len;
    at += 5 + len;
    if (need < 0 && have >= 4) {
      const first = Buffer.concat(parts);
      if (first[0] !== 1) return 'not_tls';
      need = 4 + first.readUIntBE(1, 3);
      if (need > MAX_CLIENT_HELLO) return 'not_tls';
    }
  }
  const hello = Buffer.concat(parts).subarray(4, need);
  const out: ClientHello = { servername: undefined, alpn: [] };
  try {
    let p = 2 + 32; // version, random
    p += 1 + hello[p]; // session id
    p += 2 + hello.readUInt16BE(p); // cipher suites
    p += 1 + hello[p]; // compression methods
    if (p >= hello.length) return out;
    const end = p + 2 + hello.readUInt16BE(p);
    p += 2;
    while (p + 4 <= end) {
      const type = hello.readUInt16BE(p);
      const len = hello.readUInt16BE(p + 2);
      p += 4;
      if (type === 0 && out.servername === undefined) {
        // server_name_list: list length, then (name type, length, name)...
        for (let q = p + 2; q + 3 <= p + len; q += 3 + hello.readUInt16BE(q + 1)) {
          if (hello[q] === 0) {
            out.servername = hello.subarray(q + 3, q + 3 + hello.readUInt16BE(q + 1)).toString('latin1').toLowerCase();
            break;
          }
        }
      } else if (type === 16) {
        // protocol_name_list: list length, then (length, name)...
        for (let q = p + 2; q < p + len; q += 1 + hello[q]) out.alpn.push(hello.subarray(q + 1, q + 1 + hello[q]).toString('latin1'));
      }
      p += len;
    }
    return out;
  } catch {
    return 'not_tls';
  }
}

/** Waits for the ClientHello on a paused socket, then puts the bytes back for whoever reads next. */
export function readClientHello(socket: Socket, timeoutMs: number): Promise<HelloResult> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const done = (r: HelloResult) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      if (r.ok) socket.unshift(r.bytes);
      resolve(r);
    };
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const parsed = parseClientHello(buf);
      // The bytes read so far go with the refusal: a plain HTTP request is answered from them (listen.ts).
      if (parsed === 'not_tls') done({ ok: false, reason: 'not_tls', bytes: buf });
      else if (parsed) done({ ok: true, servername: parsed.servername, bytes: buf });
      else if (buf.length > MAX_CLIENT_HELLO + 64) done({ ok: false, reason: 'too_large' });
    };
    const onClose = () => done({ ok: false, reason: 'closed' });
    const timer = setTimeout(() => done({ ok: false, reason: 'timeout' }), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
}
