// A TLS 1.3 client that no library will be: its first ClientHello names one server and,
// after the server's HelloRetryRequest, its second names another (RFC 8446 4.1.2 says the
// second must repeat the first's extensions; a hostile client need not). The first offers
// no key share, so any server asks again (HelloRetryRequest) for one of the listed groups.
// One cipher suite (TLS_AES_128_GCM_SHA256), the key schedule of RFC 8446 section 7, an
// empty Certificate when the server asks for one (the client has none), and then the
// connection as a Duplex of plaintext for Node's own HTTP/1.1 and HTTP/2 clients
// (`createConnection`). The server's certificate is not checked: what is tested is what the
// server lets through, not who it is.
import { createCipheriv, createDecipheriv, createHash, createHmac, createPublicKey, diffieHellman, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import net from 'node:net';
import { Duplex } from 'node:stream';

const HRR_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest();
const hmac = (key: Buffer, data: Buffer) => createHmac('sha256', key).update(data).digest();
const u8 = (n: number) => Buffer.from([n]);
const u16 = (n: number) => Buffer.from([n >> 8, n & 255]);
const u24 = (n: number) => Buffer.from([n >> 16, (n >> 8) & 255, n & 255]);
const vec8 = (b: Buffer) => Buffer.concat([u8(b.length), b]);
const vec16 = (b: Buffer) => Buffer.concat([u16(b.length), b]);
const vec24 = (b: Buffer) => Buffer.concat([u24(b.length), b]);
const ext = (type: number, body: Buffer) => Buffer.concat([u16(type), vec16(body)]);
const handshake = (type: number, body: Buffer) => Buffer.concat([u8(type), vec24(body)]);

function expandLabel(secret: Buffer, label: string, context: Buffer, length: number): Buffer {
  const info = Buffer.concat([u16(length), vec8(Buffer.from(`tls13 ${label}`)), vec8(context)]);
  return hmac(secret, Buffer.concat([info, u8(1)])).subarray(0, length);
}

interface Keys { key: Buffer; iv: Buffer; seq: bigint }
const keysOf = (secret: Buffer): Keys => ({ key: expandLabel(secret, 'key', Buffer.alloc(0), 16), iv: expandLabel(secret, 'iv', Buffer.alloc(0), 12), seq: 0n });
function nonce(k: Keys): Buffer {
  const n = Buffer.from(k.iv);
  const seq = Buffer.alloc(8);
  seq.writeBigUInt64BE(k.seq++);
  for (let i = 0; i < 8; i++) n[4 + i] ^= seq[i];
  return n;
}
function seal(k: Keys, type: number, data: Buffer): Buffer {
  const inner = Buffer.concat([data, u8(type)]);
  const header = Buffer.concat([u8(23), u16(0x0303), u16(inner.length + 16)]);
  const c = createCipheriv('aes-128-gcm', k.key, nonce(k));
  c.setAAD(header);
  return Buffer.concat([header, c.update(inner), c.final(), c.getAuthTag()]);
}
function open(k: Keys, header: Buffer, payload: Buffer): { type: number; data: Buffer } {
  const d = createDecipheriv('aes-128-gcm', k.key, nonce(k));
  d.setAAD(header);
  d.setAuthTag(payload.subarray(payload.length - 16));
  const inner = Buffer.concat([d.update(payload.subarray(0, payload.length - 16)), d.final()]);
  let end = inner.length - 1;
  while (end > 0 && inner[end] === 0) end--;
  return { type: inner[end], data: inner.subarray(0, end) };
}

function clientHello(name: string, alpn: string[], share: Buffer | undefined, cookie: Buffer | undefined, sessionId: Buffer): Buffer {
  const exts = [
    ext(0, vec16(Buffer.concat([u8(0), vec16(Buffer.from(name))]))),
    ext(10, vec16(Buffer.concat([u16(0x001d), u16(0x0017)]))),
    ext(13, vec16(Buffer.concat([0x0403, 0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601, 0x0503, 0x0807].map(u16)))),
    ext(43, vec8(u16(0x0304))),
    ext(45, vec8(u8(1))),
    ext(51, vec16(share ? Buffer.concat([u16(0x001d), vec16(share)]) : Buffer.alloc(0))),
    ...(alpn.length ? [ext(16, vec16(Buffer.concat(alpn.map((p) => vec8(Buffer.from(p))))))] : []),
    ...(cookie ? [ext(44, cookie)] : []),
  ];
  const body = Buffer.concat([u16(0x0303), randomBytes(32), vec8(sessionId), vec16(u16(0x1301)), vec8(u8(0)), vec16(Buffer.concat(exts))]);
  return handshake(1, body);
}

/** The extensions of a ServerHello (or HelloRetryRequest) body, by type. */
function serverHelloExtensions(body: Buffer): Map<number, Buffer> {
  let p = 2 + 32;
  p += 1 + body[p];
  p += 2 + 1;
  const end = p + 2 + body.readUInt16BE(p);
  p += 2;
  const out = new Map<number, Buffer>();
  while (p + 4 <= end) {
    const len = body.readUInt16BE(p + 2);
    out.set(body.readUInt16BE(p), body.subarray(p + 4, p + 4 + len));
    p += 4 + len;
  }
  return out;
}

export interface TwoHellos {
  /** The plaintext of the connection, once the handshake is done. */
  stream: Duplex;
  /** Whether the server asked for a client certificate (a CertificateRequest). */
  certificateRequested: boolean;
  /** The ALPN protocol the server chose. */
  alpn?: string;
}

/**
 * Connects to 127.0.0.1:`port` naming `first` in the first ClientHello and `second` in the
 * second. Resolves once the handshake is done; rejects when the server refuses it (an alert,
 * or the connection closed) or after 10 s.
 */
export function twoHellos(port: number, first: string, second: string, alpn: string[] = []): Promise<TwoHellos> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => fail(new Error('handshake took over 10 s')), 10_000);
    let settled = false;
    const fail = (e: Error) => {
      clearTimeout(timer);
      socket.destroy();
      if (!settled) {
        settled = true;
        reject(e);
      } else stream.destroy(e);
    };
    const sessionId = randomBytes(32);
    const ch1 = clientHello(first, alpn, undefined, undefined, sessionId);
    const transcript: Buffer[] = [ch1];
    let state: 'hrr' | 'sh' | 'encrypted' | 'open' = 'hrr';
    let priv: KeyObject | undefined;
    let serverKeys: Keys | undefined;
    let clientHsKeys: Keys | undefined;
    let clientAppKeys: Keys | undefined;
    let handshakeSecret: Buffer | undefined;
    let clientHsSecret: Buffer | undefined;
    let hsBuf: Buffer = Buffer.alloc(0);
    let certificateRequested = false;
    let requestContext: Buffer = Buffer.alloc(0);
    let chosenAlpn: string | undefined;
    let buf: Buffer = Buffer.alloc(0);
    const stream = new Duplex({
      write(chunk: Buffer, _enc, cb) {
        if (!clientAppKeys) return cb(new Error('not connected'));
        for (let i = 0; i < chunk.length; i += 16_000) socket.write(seal(clientAppKeys, 23, chunk.subarray(i, i + 16_000)));
        cb();
      },
      read() {},
      final(cb) {
        socket.end();
        cb();
      },
      destroy(err, cb) {
        socket.destroy();
        cb(err);
      },
    });

    // What Node's HTTP clients call on a socket besides reading and writing.
    Object.assign(stream, { setTimeout: () => stream, setNoDelay: () => stream, setKeepAlive: () => stream, ref: () => stream, unref: () => stream });
    // A refusal after the handshake (certificate_required, say) reaches whoever reads the stream; unread, it is not a crash.
    stream.on('error', () => {});

    const onHandshake = (msg: Buffer) => {
      const type = msg[0];
      const body = msg.subarray(4);
      if (state === 'hrr') {
        if (type !== 2 || !body.subarray(2, 34).equals(HRR_RANDOM)) return fail(new Error('expected a HelloRetryRequest'));
        const exts = serverHelloExtensions(body);
        if (exts.get(51)?.readUInt16BE(0) !== 0x001d) return fail(new Error('the server asked for a group other than x25519'));
        // The first ClientHello stands in the transcript as its hash (RFC 8446 4.4.1).
        transcript[0] = handshake(254, sha256(ch1));
        transcript.push(msg);
        const pair = generateKeyPairSync('x25519');
        priv = pair.privateKey;
        const pub = pair.publicKey.export({ type: 'spki', format: 'der' }).subarray(-32);
        const ch2 = clientHello(second, alpn, pub, exts.get(44), sessionId);
        transcript.push(ch2);
        socket.write(Buffer.concat([u8(22), u16(0x0301), vec16(ch2)]));
        state = 'sh';
        return;
      }
      if (state === 'sh') {
        if (type !== 2) return fail(new Error('expected a ServerHello'));
        transcript.push(msg);
        const share = serverHelloExtensions(body).get(51)!;
        const peer = share.subarray(4, 4 + share.readUInt16BE(2));
        const spki = Buffer.concat([Buffer.from('302a300506032b656e032100', 'hex'), peer]);
        const shared = diffieHellman({ privateKey: priv!, publicKey: createPublicKey({ key: spki, format: 'der', type: 'spki' }) });
        const zeros = Buffer.alloc(32);
        const early = hmac(zeros, zeros);
        handshakeSecret = hmac(expandLabel(early, 'derived', sha256(Buffer.alloc(0)), 32), shared);
        const th = sha256(Buffer.concat(transcript));
        serverKeys = keysOf(expandLabel(handshakeSecret, 's hs traffic', th, 32));
        clientHsSecret = expandLabel(handshakeSecret, 'c hs traffic', th, 32);
        clientHsKeys = keysOf(clientHsSecret);
        state = 'encrypted';
        return;
      }
      if (state === 'encrypted') {
        if (type === 8) {
          const exts = new Map<number, Buffer>();
          let p = 2;
          while (p + 4 <= body.length) { exts.set(body.readUInt16BE(p), body.subarray(p + 4, p + 4 + body.readUInt16BE(p + 2))); p += 4 + body.readUInt16BE(p + 2); }
          const a = exts.get(16);
          if (a) chosenAlpn = a.subarray(3, 3 + a[2]).toString();
        }
        if (type === 13) {
          certificateRequested = true;
          requestContext = body.subarray(1, 1 + body[0]);
        }
        if (type !== 20) return void transcript.push(msg);
        transcript.push(msg);
        const thServerFinished = sha256(Buffer.concat(transcript));
        const master = hmac(expandLabel(handshakeSecret!, 'derived', sha256(Buffer.alloc(0)), 32), Buffer.alloc(32));
        const flight: Buffer[] = [];
        if (certificateRequested) {
          const cert = handshake(11, Buffer.concat([vec8(requestContext), vec24(Buffer.alloc(0))]));
          transcript.push(cert);
          flight.push(cert);
        }
        const finishedKey = expandLabel(clientHsSecret!, 'finished', Buffer.alloc(0), 32);
        flight.push(handshake(20, hmac(finishedKey, sha256(Buffer.concat(transcript)))));
        for (const m of flight) socket.write(seal(clientHsKeys!, 22, m));
        serverKeys = keysOf(expandLabel(master, 's ap traffic', thServerFinished, 32));
        clientAppKeys = keysOf(expandLabel(master, 'c ap traffic', thServerFinished, 32));
        state = 'open';
        settled = true;
        clearTimeout(timer);
        resolve({ stream, certificateRequested, alpn: chosenAlpn });
      }
      // After the handshake: NewSessionTicket and the like, not needed.
    };

    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 5) {
        const len = buf.readUInt16BE(3);
        if (buf.length < 5 + len) break;
        const header = buf.subarray(0, 5);
        const payload = buf.subarray(5, 5 + len);
        buf = buf.subarray(5 + len);
        let type = header[0];
        let data: Buffer = payload;
        if (type === 20) continue; // change_cipher_spec, for middleboxes
        if (type === 23 && serverKeys) {
          try {
            ({ type, data } = open(serverKeys, header, payload));
          } catch (e) {
            return fail(e as Error);
          }
        }
        if (type === 21 && settled && data[1] === 0) {
          stream.push(null);
          continue;
        }
        if (type === 21) return fail(new Error(`alert ${data[1]}`));
        if (type === 23) {
          if (state === 'open') stream.push(data);
          continue;
        }
        if (type !== 22) return fail(new Error(`unexpected record type ${type}`));
        if (state === 'open') continue;
        hsBuf = Buffer.concat([hsBuf, data]);
        while (hsBuf.length >= 4 && hsBuf.length >= 4 + hsBuf.readUIntBE(1, 3)) {
          const msg = hsBuf.subarray(0, 4 + hsBuf.readUIntBE(1, 3));
          hsBuf = hsBuf.subarray(msg.length);
          const before = state;
          onHandshake(msg);
          // onHandshake may have moved it on (TypeScript's narrowing does not see that).
          const now = state as typeof before | 'open';
          if (settled && now !== 'open') return;
          // The server's first flight after ServerHello is under its handshake keys.
          if (before === 'sh' && now === 'encrypted' && hsBuf.length) return fail(new Error('plaintext after ServerHello'));
        }
      }
    });
    socket.on('error', (e) => fail(e));
    socket.on('close', () => {
      if (!settled) fail(new Error('closed during the handshake'));
      else stream.push(null);
    });
    socket.write(Buffer.concat([u8(22), u16(0x0301), vec16(ch1)]));
  });
}
