// Proxied connections to a version-2 agent (stream type 3): the type, an 8-byte little-endian
// header length, the header ({Id, ClientAddr, Proto, EdgeType, PassthroughTLS}), then the
// connection's bytes both ways, which the SDK copies to its upstream unread. The ingress's
// relays take these as they take edgeform's own agent's HTTP/2 streams (backends/relay.ts):
// a raw stream answers 'response' with 200 at once; an HTTP request is spoken as HTTP/1.1 over
// its own proxied connection, and its answer's head comes as 'response'.
import http from 'node:http';
import { Duplex } from 'node:stream';
import { CONNECTION_HEADERS } from '../../../agent/protocol.js';
import type { MuxSession, MuxStream } from './muxado.js';
import { STREAM_TYPE } from './rpc.js';

export interface ProxyTarget { id: string; proto: string; labeled: boolean; passthroughTls?: boolean }

/** A proxied connection to the tunnel's upstream (the stream is open when this returns). */
export function openProxy(mux: MuxSession, t: ProxyTarget, clientAddr: string): MuxStream {
  const s = mux.open();
  const head = Buffer.from(JSON.stringify({ Id: t.id, ClientAddr: clientAddr, Proto: t.labeled ? '' : t.proto, EdgeType: t.labeled ? (t.proto === 'tcp' ? '1' : '3') : '', PassthroughTLS: t.passthroughTls ?? false }));
  const prefix = Buffer.alloc(12);
  prefix.writeUInt32BE(STREAM_TYPE.PROXY, 0);
  prefix.writeBigInt64LE(BigInt(head.length), 4);
  s.write(Buffer.concat([prefix, head]));
  return s;
}

/** A raw stream (WebSockets, TCP edges): answers 'response' 200 at once, as a CONNECT stream whose agent reached the upstream. */
export function rawStream(s: MuxStream): MuxStream {
  process.nextTick(() => s.emit('response', { ':status': 200 }));
  return s;
}

const DROP = new Set<string>([...CONNECTION_HEADERS, 'host']);

/** One HTTP request over its own proxied connection, seen as an HTTP/2 client stream. */
export class RelayedRequest extends Duplex {
  private readonly req: http.ClientRequest;
  private res?: http.IncomingMessage;

  constructor(private readonly conn: MuxStream, r: { method: string; path: string; headers?: Record<string, string | string[] | undefined>; endStream?: boolean }) {
    super({ allowHalfOpen: true });
    const headers: Record<string, string | string[]> = {};
    let host = '';
    for (const k in r.headers) {
      const v = r.headers[k];
      if (v === undefined) continue;
      const name = k.toLowerCase();
      if (name === ':authority' || name === 'host') host = String(v);
      if (name.charCodeAt(0) === 58 || DROP.has(name)) continue;
      headers[name] = v;
    }
    headers.host = host || 'localhost';
    headers.connection = 'close';
    this.req = http.request({ method: r.method, path: r.path, headers, createConnection: () => conn as never, setHost: false });
    this.req.on('response', (res) => {
      this.res = res;
      const h: Record<string, unknown> = { ':status': res.statusCode };
      for (const [k, v] of Object.entries(res.headers)) if (!DROP.has(k)) h[k] = v;
      this.emit('response', h);
      res.on('data', (c: Buffer) => { if (!this.push(c)) res.pause(); });
      res.on('end', () => this.push(null));
      res.on('error', (e) => this.destroy(e));
      res.on('aborted', () => this.destroy(new Error('the upstream answer was cut')));
    });
    this.req.on('error', (e) => this.destroy(e));
    if (r.endStream) {
      this.req.end();
      this.end();
    }
  }

  override _read() {
    this.res?.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void) {
    if (this.req.write(chunk)) cb();
    else this.req.once('drain', () => cb());
  }

  override _final(cb: (e?: Error | null) => void) {
    if (!this.req.writableEnded) this.req.end();
    cb();
  }

  override _destroy(err: Error | null, cb: (e?: Error | null) => void) {
    this.req.destroy();
    this.conn.destroy();
    cb(err);
  }

  close() {
    this.destroy();
  }
}
