// Clients of the real `--ingress` listeners, as curl --connect-to would be: TLS to a loopback
// port with the server name of an edge's host, trusting the server's local CA (or a given CA),
// over HTTP/1.1, HTTP/2 and WebSockets; raw TCP/TLS connections for TCP and TLS edges; and
// the curl binary itself. One of each: the in-process servers (server.ts) and the
// `edgeform serve` processes (ingress.ts) are reached the same way.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type net from 'node:net';
import tls from 'node:tls';
import { Agent, WebSocket } from 'undici';
import { ERRORS } from '../../server/http/errors.js';
import type { TestServer } from './server.js';

/** The loopback port of the listener that stands for `publicPort`. */
export function ingressPort(s: TestServer, publicPort: number): number {
  const l = s.server.ingress?.listeners.find((x) => x.publicPort === publicPort);
  if (!l) throw new Error(`no ingress listener for public port ${publicPort}`);
  return l.port;
}

export const localCa = (s: TestServer) => fs.readFileSync(s.server.ingress!.caFile, 'utf8');

/** An HTTPS edge `host:publicPort` whose one route (`/`) answers `body` with an http_response backend. */
export async function edgeAnswering(s: TestServer, host: string, body: string, publicPort = 443): Promise<{ edgeId: string }> {
  const b = await s.post('/backends/http_response', { body });
  const e = await s.post('/edges/https', { hostports: [`${host}:${publicPort}`] });
  await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.body.id } });
  return { edgeId: e.body.id };
}

export interface EdgeRequest {
  /** The loopback port to connect to. */
  port: number;
  /** Host header and (unless `servername` says otherwise) SNI. */
  host: string;
  path?: string;
  method?: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  ca?: string | string[];
  /** SNI; null sends none. Default: `host`. */
  servername?: string | null;
  /** Skip certificate checks (for what is not about certificates: unknown hosts, no SNI). */
  insecure?: boolean;
  cert?: string;
  key?: string;
  minVersion?: tls.SecureVersion;
  maxVersion?: tls.SecureVersion;
  /** A keep-alive agent (default: a new connection). */
  agent?: https.Agent;
  /** The loopback address to connect from (another client address: 127.0.0.2). */
  localAddress?: string;
}

export interface EdgeReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  /** The certificate the server presented. */
  peer?: tls.PeerCertificate;
}

/** One HTTPS/1.1 request, as `curl --connect-to host:443:127.0.0.1:port https://host/path` sends it. */
export function edgeRequest(o: EdgeRequest): Promise<EdgeReply> {
  return new Promise((resolve, reject) => {
    const servername = o.servername === null ? undefined : (o.servername ?? o.host);
    const req = https.request({
      host: '127.0.0.1',
      port: o.port,
      path: o.path ?? '/',
      method: o.method ?? 'GET',
      headers: { host: o.host, ...o.headers },
      servername: servername ?? '',
      ca: o.ca,
      cert: o.cert,
      key: o.key,
      minVersion: o.minVersion,
      maxVersion: o.maxVersion,
      rejectUnauthorized: !o.insecure,
      // The name checked is the one the client asked for, as curl checks it.
      checkServerIdentity: (_h, cert) => tls.checkServerIdentity(servername ?? o.host, cert),
      agent: o.agent ?? false,
      localAddress: o.localAddress,
    }, (res) => {
      const peer = (res.socket as tls.TLSSocket).getPeerCertificate?.();
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString(), peer });
      });
      res.on('error', reject);
    });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(o.body);
  });
}

/** One HTTP/2 request (ALPN h2) to the listener, with `headers` besides; also reports the protocol the server chose. */
export function h2Get(port: number, name: string, path: string, ca: string, extra: http2.OutgoingHttpHeaders = {}): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: string; alpn: string | false | null }> {
  return new Promise((resolve, reject) => {
    const client = http2.connect(`https://${name}`, { createConnection: connector(port, name, ca, ['h2']) });
    client.on('error', reject);
    const stream = client.request({ ':path': path, ...extra });
    let headers: http2.IncomingHttpHeaders = {};
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (h) => { headers = h; });
    stream.on('data', (c) => { body += c; });
    stream.on('end', () => {
      const alpn = (client.socket as tls.TLSSocket).alpnProtocol ?? false;
      client.close();
      resolve({ status: Number(headers[':status']), headers, body, alpn });
    });
    stream.on('error', reject);
  });
}

/** POSTs `body` to `path` on an open HTTP/2 session and reads the whole answer: its status and whether it came back as sent (by SHA-256). */
export async function h2Echoed(session: http2.ClientHttp2Session, path: string, authority: string, body: Buffer): Promise<{ status: number; same: boolean }> {
  const stream = session.request({ ':method': 'POST', ':path': path, ':authority': authority });
  stream.end(body);
  const head = await new Promise<http2.IncomingHttpHeaders>((r) => stream.once('response', r));
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  return { status: Number(head[':status']), same: digest(Buffer.concat(chunks)) === digest(body) };
}

export interface Exchanged {
  data: Buffer;
  /** `data` as UTF-8 text. */
  text: string;
  /** Whether the peer closed the connection (rather than `want` or `quietMs` ending it). */
  closed: boolean;
  /** The code of the socket error that closed it (ECONNREFUSED, ECONNRESET, ...). */
  error?: string;
}

/**
 * Writes `send` (when given) and reads what comes back until the peer closes the
 * connection, `want` bytes came, `quietMs` pass with nothing new, or 10 s in all.
 */
export function exchange(socket: net.Socket, send?: string | Buffer, until: { want?: number; quietMs?: number; boundMs?: number } = {}): Promise<Exchanged> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let error: string | undefined;
    let quiet: NodeJS.Timeout | undefined;
    const done = (closed: boolean) => {
      clearTimeout(quiet);
      clearTimeout(bound);
      socket.off('data', onData);
      socket.off('close', onClose);
      const data = Buffer.concat(chunks);
      resolve({ data, text: data.toString(), closed, error });
    };
    const hush = () => {
      if (until.quietMs === undefined) return;
      clearTimeout(quiet);
      quiet = setTimeout(() => done(false), until.quietMs);
    };
    const onData = (c: Buffer | string) => {
      const b = Buffer.from(c);
      chunks.push(b);
      n += b.length;
      if (n >= (until.want ?? Infinity)) done(false);
      else hush();
    };
    const onClose = () => done(true);
    const bound = setTimeout(() => done(false), until.boundMs ?? 10_000);
    // Kept after the exchange too: a reset after it must not crash the test.
    socket.on('error', (e: NodeJS.ErrnoException) => { error ??= e.code ?? e.message; });
    if (socket.destroyed) return done(true);
    socket.on('data', onData);
    socket.once('close', onClose);
    hush();
    if (send !== undefined && send.length) socket.write(send);
  });
}

/** A TLS connection to the listener (resolves once the handshake is done, rejects if it fails or takes over 20 s). */
export function tlsConnect(port: number, o: tls.ConnectionOptions = {}): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ...o }, () => { clearTimeout(timer); resolve(socket); });
    const timer = setTimeout(() => socket.destroy(new Error('handshake took over 20 s')), 20_000);
    socket.once('error', (e) => { clearTimeout(timer); reject(e); });
    socket.once('close', () => { clearTimeout(timer); reject(new Error('closed during the handshake')); });
  });
}

/** The socket a curl-like client opens for `host`: TCP to the loopback port, TLS with SNI. */
function connector(port: number, host: string, ca: string, alpn: string[]) {
  return () => tls.connect({ host: '127.0.0.1', port, servername: host, ca, ALPNProtocols: alpn });
}

/** An undici WebSocket to wss://host/path through the loopback port (RFC 6455 framing by undici). */
export function webSocket(port: number, host: string, ca: string, p: string): WebSocket {
  const dispatcher = new Agent({
    connect: (_opts, cb) => {
      const s = connector(port, host, ca, ['http/1.1'])();
      s.once('secureConnect', () => cb(null, s));
      s.once('error', (e) => cb(e, null));
    },
  });
  return new WebSocket(`wss://${host}${p}`, { dispatcher });
}

/** The first message on a WebSocket (or why none came, within 10 s). */
export function nextMessage(ws: WebSocket): Promise<Buffer | string> {
  ws.binaryType = 'arraybuffer';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no message within 10 s')), 10_000);
    ws.addEventListener('message', (e) => { clearTimeout(timer); resolve(typeof e.data === 'string' ? e.data : Buffer.from(e.data as ArrayBuffer)); }, { once: true });
    ws.addEventListener('error', (e) => { clearTimeout(timer); reject(new Error(`websocket error: ${(e as any).message ?? e.type}`)); }, { once: true });
    ws.addEventListener('close', (e) => { clearTimeout(timer); reject(new Error(`websocket closed ${e.code} ${e.reason}`)); }, { once: true });
  });
}

export function wsOpen(ws: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('not open within 10 s')), 10_000);
    ws.addEventListener('open', () => { clearTimeout(timer); resolve(); }, { once: true });
    ws.addEventListener('error', (e) => { clearTimeout(timer); reject(new Error(`websocket refused: ${(e as any).message ?? e.type}`)); }, { once: true });
  });
}

/** The real curl binary (-sS); resolves with its exit code and output, never rejects. */
export function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', '--max-time', '20', ...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/**
 * An answer made at the edge: its status, and a code from the error registry, sent in the
 * `edgeform-error-code` header and written in the short page, whose status is the reply's.
 */
export function edgeErrorCode(r: EdgeReply, status: number): string {
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${r.text.slice(0, 300)}`);
  const code = String(r.headers['edgeform-error-code'] ?? '');
  if (!/^ERR_SERVICE_\d+$/.test(code)) throw new Error(`no edgeform-error-code header on the ${status}: ${JSON.stringify(r.headers)}`);
  if (!r.text.includes(code)) throw new Error(`the ${status} page does not name ${code}: ${r.text.slice(0, 300)}`);
  const entry = (ERRORS as Record<string, { status: number }>)[code];
  if (!entry) throw new Error(`${code} is not in the error registry (server/http/errors.ts)`);
  if (entry.status !== status) throw new Error(`${code} is registered with status ${entry.status}, answered ${status}`);
  return code;
}
