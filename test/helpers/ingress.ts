// The ingress as a user meets it: `edgeform serve --ingress PUBLIC=127.0.0.1:PORT` as a real
// process, manifests applied with `edgeform apply -f`, and clients that speak to the
// listeners over real sockets the way curl does (node:https and node:http2 with the CA from
// `<data-dir>/ingress-ca.pem`, TLS sockets, WebSockets, the curl binary with --connect-to).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { Agent, WebSocket } from 'undici';
import { ERRORS } from '../../server/http/errors.js';
import type { CliResult } from './cli.js';
import { runCliProcess } from './cli-process.js';
import { serve, type Serving } from './serve.js';
import { tempDir } from './temp.js';
import { h2Get, tlsConnect } from './ingress-client.js';
import { until } from './wait.js';

export { tlsConnect };

export const INGRESS_TOKEN = 'ingresstoken0123456789abcdefghijklmnopqrstuvw';

/** A port nothing listens on right now (the kernel's pick, released at once). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

export interface ApiReply { status: number; body: any }

export interface Ingress {
  serving: Serving;
  /** The API's base URL. */
  url: string;
  token: string;
  dataDir: string;
  /** The loopback port that stands for a public port. */
  port(publicPort: number): number;
  api(method: string, p: string, body?: unknown): Promise<ApiReply>;
  /** `edgeform apply -f <file> --auto-approve` (the file written into a fresh folder); throws unless it exits 0. */
  apply(manifest: string): Promise<CliResult>;
  /** `<data-dir>/ingress-ca.pem`, once the server has made it (first use: one handshake). */
  ca(): Promise<string>;
  /** The server's stdout lines, parsed. */
  lines(): Record<string, unknown>[];
}

/** `edgeform serve --ingress P=127.0.0.1:<free>` for each public port, on a fresh data folder; `args` are more serve flags. */
export async function startIngress(publicPorts: number[], env: Record<string, string> = {}, args: string[] = []): Promise<Ingress> {
  const dataDir = tempDir('edgeform-ingress-');
  const ports = new Map<number, number>();
  for (const p of publicPorts) ports.set(p, await freePort());
  const flags = ['--data-dir', dataDir, ...[...ports].flatMap(([pub, local]) => ['--ingress', `${pub}=127.0.0.1:${local}`]), ...args];
  const serving = await serve(flags, { EDGEFORM_BOOTSTRAP_TOKEN: INGRESS_TOKEN, EDGEFORM_API_RATE_LIMIT: '0', EDGEFORM_AGENT_HEARTBEAT_INTERVAL: '2', ...env });
  const port = (pub: number) => {
    const p = ports.get(pub);
    if (p === undefined) throw new Error(`no --ingress for public port ${pub}`);
    return p;
  };
  const api = async (method: string, p: string, body?: unknown): Promise<ApiReply> => {
    const r = await fetch(`${serving.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${INGRESS_TOKEN}`, 'service-version': '2', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  };
  let applied = 0;
  const ing: Ingress = {
    serving,
    url: serving.url,
    token: INGRESS_TOKEN,
    dataDir,
    port,
    api,
    async apply(manifest) {
      const dir = tempDir('edgeform-ingress-manifest-');
      const file = path.join(dir, `web-${++applied}.yaml`);
      fs.writeFileSync(file, manifest);
      const r = await runCliProcess(['apply', '-f', file, '--auto-approve'], { EDGEFORM_API_URL: serving.url, EDGEFORM_API_KEY: INGRESS_TOKEN }, { cwd: dir, timeoutMs: 60_000 });
      if (r.code !== 0) throw new Error(`edgeform apply exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
      return r;
    },
    async ca() {
      const file = path.join(dataDir, 'ingress-ca.pem');
      if (!fs.existsSync(file)) {
        // "Created on first use": one handshake on any HTTPS listener makes it.
        const pub = [...ports.keys()][0];
        await new Promise<void>((resolve) => {
          const s = tls.connect({ host: '127.0.0.1', port: port(pub), servername: 'first-use.example.com', rejectUnauthorized: false }, () => { s.destroy(); resolve(); });
          s.on('error', () => resolve());
        });
        await until(() => fs.existsSync(file), 10_000, () => `${file} was not written after a handshake`);
      }
      return fs.readFileSync(file, 'utf8');
    },
    lines: () => serving.lines(),
  };
  return ing;
}

/** A credential's token, made through the API. */
export async function agentToken(ing: Ingress): Promise<string> {
  const r = await ing.api('POST', '/credentials', { acl: [] });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r.body.token;
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

/** A TLS connection (resolves once the handshake is done, or rejects with why it failed). */

/** Writes `bytes` and reads until the peer closes or `want` bytes came (bounded at 10 s). */
export function exchange(socket: net.Socket, bytes: string | Buffer, want = Infinity): Promise<{ data: Buffer; closed: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let n = 0;
    const done = (closed: boolean) => { clearTimeout(timer); socket.removeAllListeners('data'); resolve({ data: Buffer.concat(chunks), closed }); };
    const timer = setTimeout(() => done(false), 10_000);
    socket.on('data', (c: Buffer) => { chunks.push(c); n += c.length; if (n >= want) done(false); });
    socket.once('close', () => done(true));
    socket.on('error', () => {});
    if (bytes.length) socket.write(bytes);
  });
}

/** The socket a curl-like client opens for `host`: TCP to the loopback port, TLS with SNI. */
function connector(port: number, host: string, ca: string, alpn: string[]) {
  return () => tls.connect({ host: '127.0.0.1', port, servername: host, ca, ALPNProtocols: alpn });
}

/** One HTTP/2 request (ALPN h2); also reports the protocol the server chose. */
export async function h2Request(port: number, host: string, ca: string, p: string): Promise<{ status: number; body: string; alpn: string | false | null }> {
  const { status, body, alpn } = await h2Get(port, host, p, ca);
  return { status, body, alpn };
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

/** Requests in flight at once for `total` requests; returns every reply. */
export async function many<T>(total: number, concurrency: number, one: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(total);
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const i = next++;
      out[i] = await one(i);
    }
  }));
  return out;
}
