// The listeners' hook for ACME validation, before any edge is chosen: on the listener that
// stands for public port 80 a plain HTTP connection is answered here (HTTP-01: the key
// authorization at /.well-known/acme-challenge/TOKEN, 404 for anything else); on the one for
// port 443 a ClientHello that offers only ALPN `acme-tls/1` for a name being validated gets
// the challenge certificate (TLS-ALPN-01, RFC 8737) and the connection ends after the
// handshake. Everything else goes on to the edges untouched. Bounded like the listener: the
// first bytes within the handshake timeout, the HTTP head within the headers timeout.
import http from 'node:http';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import { MAX_CLIENT_HELLO, parseClientHello } from '../client-hello.js';
import type { Challenges } from './challenges.js';

export const HTTP01_PORT = 80;
export const TLSALPN01_PORT = 443;
const PREFIX = '/.well-known/acme-challenge/';

/** The first bytes of a paused connection: up to a whole ClientHello, or the first chunk of anything else. */
function peek(socket: Socket, timeoutMs: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const done = (r: Buffer | undefined) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      if (r) socket.unshift(r);
      resolve(r);
    };
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf[0] !== 22 || buf.length > MAX_CLIENT_HELLO + 64 || parseClientHello(buf) !== null) done(buf);
    };
    const onClose = () => done(undefined);
    const timer = setTimeout(() => done(buf.length ? buf : undefined), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
}

export class AcmeIntercept {
  private readonly plain: http.Server;
  private readonly alpnServer: tls.Server;
  /** Challenge contexts for handshakes under way, by name (bounded: entries live for one handshake). */
  private readonly alpnContexts = new Map<string, tls.SecureContext>();

  constructor(private challenges: Challenges, private limits: { handshakeTimeoutMs: number; headersTimeoutMs: number }, private log: (f: Record<string, unknown>) => void) {
    this.plain = http.createServer((req, res) => void this.answerHttp(req, res));
    this.plain.headersTimeout = limits.headersTimeoutMs;
    this.plain.requestTimeout = limits.headersTimeoutMs;
    this.plain.keepAliveTimeout = 5_000;
    this.plain.maxHeadersCount = 100;
    // Node checks those timeouts only for servers that emitted 'listening' (this one is handed connections).
    this.plain.emit('listening');
    this.alpnServer = tls.createServer({
      ALPNProtocols: ['acme-tls/1'],
      handshakeTimeout: limits.handshakeTimeoutMs,
      SNICallback: (name, cb) => {
        const ctx = this.alpnContexts.get(name.toLowerCase());
        if (ctx) cb(null, ctx);
        else cb(new Error('no challenge for this name'), undefined);
      },
    }, (socket) => socket.end());
    this.alpnServer.on('tlsClientError', () => {});
  }

  /** Whether this hook took the connection (the caller then leaves it alone). */
  async take(socket: Socket, publicPort: number): Promise<boolean> {
    if (publicPort !== HTTP01_PORT && publicPort !== TLSALPN01_PORT) return false;
    const first = await peek(socket, this.limits.handshakeTimeoutMs);
    if (!first) {
      socket.destroy();
      return true;
    }
    if (first[0] !== 22) {
      if (publicPort !== HTTP01_PORT) return false;
      this.plain.emit('connection', socket);
      // The peek paused it; the parser reads from the stream (the bytes put back first).
      socket.resume();
      return true;
    }
    if (publicPort !== TLSALPN01_PORT) return false;
    const hello = parseClientHello(first);
    if (!hello || hello === 'not_tls' || hello.alpn.length !== 1 || hello.alpn[0] !== 'acme-tls/1') return false;
    const name = hello.servername;
    if (!name) return false;
    let ctx: tls.SecureContext | undefined;
    try {
      ctx = await this.challenges.alpnContext(name);
    } catch (e) {
      this.log({ level: 'warn', msg: `acme: reading the TLS-ALPN-01 challenge failed: ${(e as Error).message}`, hostname: name });
    }
    if (!ctx) return false;
    this.alpnContexts.set(name, ctx);
    socket.once('close', () => this.alpnContexts.delete(name));
    this.alpnServer.emit('connection', socket);
    return true;
  }

  /**
   * On a plain-HTTP listener (`--ingress-http`) for port 80, which serves other requests too:
   * answers a request for an HTTP-01 challenge path (true), else leaves it (false).
   */
  challenge(req: http.IncomingMessage, res: http.ServerResponse, publicPort: number): boolean {
    if (publicPort !== HTTP01_PORT || !(req.url ?? '').startsWith(PREFIX)) return false;
    void this.answerHttp(req, res);
    return true;
  }

  private async answerHttp(req: http.IncomingMessage, res: http.ServerResponse) {
    const path = (req.url ?? '').split('?')[0];
    let answer: string | undefined;
    if ((req.method === 'GET' || req.method === 'HEAD') && path.startsWith(PREFIX)) {
      try {
        answer = await this.challenges.httpAnswer(path.slice(PREFIX.length));
      } catch (e) {
        this.log({ level: 'warn', msg: `acme: reading the HTTP-01 challenge failed: ${(e as Error).message}` });
      }
    }
    if (answer === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain', connection: 'close' });
      return void res.end('not found: this port answers ACME HTTP-01 challenges only; the edges are served over TLS\n');
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(answer);
  }
}
