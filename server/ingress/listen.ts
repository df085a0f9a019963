// The ingress listeners: one plain TCP listener per `--ingress PUBLIC_PORT=ADDRESS:PORT`,
// speaking whatever the edges on PUBLIC_PORT speak, decided per connection from the table
// (so a port can change from HTTPS to TCP edges without a restart): raw TCP for a TCP edge;
// for HTTPS and TLS edges the ClientHello's server name picks the edge, which picks the TLS
// server that terminates it (tls.ts), or the bytes pass through untouched (TLS edges that
// terminate upstream or at the agent). Every stage is bounded: connections per listener,
// time and bytes to the ClientHello, the handshake, HTTP headers and idle time.
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { Metrics } from '../http/metrics.js';
import { endpointTunnelFor, passThroughTls, pickEndpointTunnel } from './agent-endpoints.js';
import { readClientHello } from './client-hello.js';
import { ClientRelays } from './client-relays.js';
import { handleHttpsRequest, handleHttpsUpgrade, type HttpsContext } from './http/handler.js';
import type { LiveTable } from './live-table.js';
import { clientIpOf, streamEdge, type StreamDeps } from './tcp.js';
import { ERROR_CODE_HEADER, errorAnswer } from './http/error-page.js';
import { terminationKey, terminationOf, type Termination, type TlsContexts } from './tls.js';
import type { CloudEndpointEntry, EdgeAnswer, HttpsEdgeEntry, IngressDeps, IngressListenerSpec, IngressTable, StreamEdgeEntry } from './types.js';
import { connectCloudEndpoint, publicTcpCloudEndpoint, publicTlsCloudEndpoint } from './cloud-endpoints.js';

/** The default of `--ingress-connections-per-client`: far above what a browser opens (6 per host over HTTP/1.1, one over HTTP/2). */
export const DEFAULT_CONNECTIONS_PER_CLIENT = 256;
/** The default of `--ingress-body-idle-timeout`. */
export const DEFAULT_BODY_IDLE_MS = 10_000;

export interface ListenerLimits {
  /** Open connections per listener; past it new ones are closed at once. */
  maxConnections: number;
  /** Time for a client to send its ClientHello, and then to finish the handshake. */
  handshakeTimeoutMs: number;
  /** Time for a client to send a request's headers (slow clients are cut). */
  headersTimeoutMs: number;
  /** A connection (or HTTP/2 session) idle this long is closed. */
  idleTimeoutMs: number;
  /**
   * Request header bytes at most, request line included: 431 past it, on HTTP/1.1 (Node's
   * parser) and HTTP/2 (counted as RFC 9113 does; nghttp2 itself refuses past four times it).
   */
  maxHeaderBytes: number;
  /** Request-target bytes at most: 414 past it (a longer head is 431 above). */
  maxUrlBytes: number;
  /**
   * Requests in flight on one connection: HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS, and HTTP/1.1
   * requests pipelined ahead of their answers (Node starts each at once; past this the
   * connection is closed). Without it one connection could start thousands of upstream requests.
   */
  maxRequestsPerConnection: number;
  /**
   * Open connections of one client address (an IPv6 /64) per listener; past it its new ones are
   * closed at once (`--ingress-connections-per-client`, 0: no bound). Without it one address
   * could hold every one of maxConnections.
   */
  connectionsPerClient: number;
  /**
   * A request body that sends no byte for this long is cut: 408 ERR_SERVICE_861 and the
   * connection closed (HTTP/1.1), RST_STREAM (HTTP/2) (`--ingress-body-idle-timeout`; 0: never).
   */
  bodyIdleTimeoutMs: number;
}

export const LISTENER_LIMITS: ListenerLimits = {
  maxConnections: 10_000,
  handshakeTimeoutMs: 10_000,
  headersTimeoutMs: 10_000,
  idleTimeoutMs: 60_000,
  maxHeaderBytes: 16_384,
  maxUrlBytes: 8_192,
  maxRequestsPerConnection: 100,
  connectionsPerClient: DEFAULT_CONNECTIONS_PER_CLIENT,
  bodyIdleTimeoutMs: DEFAULT_BODY_IDLE_MS,
};

export interface ListenerDeps {
  live: LiveTable;
  contexts: TlsContexts;
  deps: IngressDeps;
  metrics: Metrics;
  limits: ListenerLimits;
  /** ACME validation answered before any edge (only with --acme-directory). */
  acme?: import('./acme/intercept.js').AcmeIntercept;
  /** The public ports of the TLS listeners: where a plain-HTTP listener redirects a name served over TLS. */
  tlsPorts?: number[];
}


/**
 * The request's authority as sent: HTTP/2's :authority (else Host); for HTTP/1.1 the Host read
 * from rawHeaders, since req.headers is built on first use, which an answer at the edge need
 * never pay for. Undefined when there is none, null when an HTTP/1.x request has several.
 */
function authorityOf(req: http.IncomingMessage | http2.Http2ServerRequest, h1: boolean): string | undefined | null {
  if (!h1) {
    const h = req.headers as Record<string, unknown>;
    const a = h[':authority'] ?? h.host;
    return a === undefined ? undefined : String(a);
  }
  let host: string | undefined;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length !== 4 || raw[i].toLowerCase() !== 'host') continue;
    if (host !== undefined) return null;
    host = raw[i + 1];
  }
  return host;
}

/** The host name of an authority: lower case, without port or IPv6 brackets. */
function hostOfAuthority(raw: string): string {
  const end = raw.charCodeAt(0) === 91 /* [ */ ? raw.indexOf(']') : -1;
  if (end > 0) return raw.slice(1, end).toLowerCase();
  const colon = raw.indexOf(':');
  return (colon < 0 ? raw : raw.slice(0, colon)).toLowerCase();
}

/**
 * An authority that is not `host[:port]` (a registered name or a bracketed IPv6 address, an
 * optional port of digits), or whose port is not the listener's public port: 400
 * ERR_SERVICE_860. `app.example.com:x@evil.example` would otherwise pass the name check (its
 * host part is the connection's name) and reach the upstream, and X-Forwarded-Host, as sent.
 * No port (or an empty one) is the scheme's default and is accepted.
 */
function authorityRefused(raw: string | undefined, publicPort: number): EdgeAnswer | undefined {
  if (raw === undefined) return undefined;
  const m = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(\d*))?$/.exec(raw);
  if (m && (!m[1] || Number(m[1]) === publicPort)) return undefined;
  return errorAnswer('ERR_SERVICE_860', m ? `the request names port ${m[1]}; this listener is public port ${publicPort}` : 'the request\'s Host is not a host name with an optional port');
}

/** A request whose host is not the name its TLS connection was opened for (no edge's content crosses names). */
function misdirected(res: http.ServerResponse | http2.Http2ServerResponse, sni: string, host: string) {
  writeAnswer(res, errorAnswer('ERR_SERVICE_701', sni
    ? `this connection was opened for ${sni}; send requests for ${host || 'another host'} on a connection opened for it`
    : `this connection was opened without a server name (SNI); send requests for ${host} on a connection opened for that name`));
}

/**
 * A plain HTTP request on a listener that speaks TLS (as nginx's "The plain HTTP request was
 * sent to HTTPS port"): 400 ERR_SERVICE_705 naming the https:// URL to use, the host read from
 * what already arrived when it is a plain name, then the connection is closed.
 */
function plainHttpOnTls(socket: net.Socket, first: Buffer, publicPort: number) {
  const head = first.subarray(0, 8192).toString('latin1');
  const sent = /\r\nhost:[ \t]*([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d+)?[ \t]*\r\n/i.exec(head)?.[1]?.toLowerCase();
  const path = /^[A-Z]+ (\/[\x21-\x7e]*) HTTP\//.exec(head)?.[1] ?? '/';
  const url = sent ? `https://${sent}${publicPort === 443 ? '' : `:${publicPort}`}${path.length <= 200 ? path : '/'}` : undefined;
  const a = errorAnswer('ERR_SERVICE_705', `this port speaks TLS: the plain HTTP request was sent to an HTTPS port; send it with https://${url ? ` (${url})` : ''}`);
  answerRaw(socket, a);
  // What else the client sends is read and dropped until the answer is out (see answerRaw).
  socket.resume();
}

/** An answer the listener makes itself, before any edge or route is chosen, with its code in the header too. */
function writeAnswer(res: http.ServerResponse | http2.Http2ServerResponse, a: EdgeAnswer) {
  res.writeHead(a.status, { ...a.headers, [ERROR_CODE_HEADER]: a.code! });
  res.end(a.body ?? '');
}

/**
 * An HTTP/1.1 request with no Host header, or with more than one (`authority` undefined or
 * null): RFC 9112 (3.2) has a server answer 400. Node keeps the first of several, so an
 * upstream could be told one host while the edge routed by another.
 */
function hostHeaderInvalid(req: http.IncomingMessage | http2.Http2ServerRequest, authority: string | undefined | null): boolean {
  return authority == null && req.httpVersionMajor === 1 && req.httpVersionMinor === 1;
}

/** A refusal at the listener; HTTP/1.1 closes the connection after it. */
function refuse(res: http.ServerResponse | http2.Http2ServerResponse, a: EdgeAnswer) {
  if ('shouldKeepAlive' in res) {
    res.shouldKeepAlive = false;
    writeAnswer(res, { ...a, headers: { ...a.headers, connection: 'close' } });
  } else writeAnswer(res, a);
}

function badHost(res: http.ServerResponse, hosts: string) {
  res.shouldKeepAlive = false;
  writeAnswer(res, errorAnswer('ERR_SERVICE_702', `an HTTP/1.1 request needs exactly one Host header (${hosts})`, { connection: 'close' }));
}

/** What the listener keeps in a request's context for its end (answered). */
interface ListenerContext extends HttpsContext {
  socket: tls.TLSSocket;
  h1: boolean;
  startedAt: number;
}

/** A connection's server name and client address, kept on its socket for its later requests. */
const PEER = Symbol('edgeform.peer');

/**
 * What set up a connection's handshake, by its raw socket: the server name of its first
 * ClientHello and the termination (minimum version, client-certificate authorities) that name
 * chose. A TLS 1.3 client may send a second ClientHello after a HelloRetryRequest; Node asks
 * for the certificate once, for the first, while OpenSSL reports the second's name as the
 * connection's (`socket.servername`). A connection whose negotiated name is not the one its
 * settings came from is closed before any byte of it is read: otherwise any name first and a
 * `mutual_tls` edge's second would get that edge without a client certificate.
 */
const APPLIED = new WeakMap<net.Socket, { name: string; key: string }>();

/** Whether a terminated connection's negotiated name is the one its handshake's settings came from (false when unknown). */
function sameName(socket: tls.TLSSocket): boolean {
  const raw = (socket as unknown as { _parent?: net.Socket })._parent;
  const applied = raw && APPLIED.get(raw);
  return !!applied && applied.name === String(socket.servername || '').toLowerCase();
}

/** The applied termination of a connection (see APPLIED), undefined when unknown. */
function appliedKeyOf(socket: tls.TLSSocket): string | undefined {
  const raw = (socket as unknown as { _parent?: net.Socket })._parent;
  return raw ? APPLIED.get(raw)?.key : undefined;
}

/** An edge's termination key as the table has it now (no edge: an unknown name's). */
const terminationKeyOf = (doc: HttpsEdgeEntry['doc'] | undefined): string => terminationKey(doc ? terminationOf(doc) : DEFAULT_TERMINATION);

/** What an unknown name on an HTTPS port is terminated with: a local-CA certificate, then a 404 page. */
const DEFAULT_TERMINATION: Termination = { minVersion: '1.2', caIds: [] };

/** How long a connection answered for bad input is read (and what comes dropped) before it is cut. */
const LINGER_MS = 2_000;

/** Connections already answered for bad input: the parser reports every later chunk again. */
const answeredBadInput = new WeakSet<Duplex>();

/**
 * HTTP/1.1 that never became a request: answered on the raw connection, which then closes.
 * The answer is written and the write side closed, then what the client is still sending (the
 * rest of a 100 KB request line) is read and dropped for up to LINGER_MS: closing with unread
 * bytes makes the kernel reset the connection, and the client would lose the answer with it.
 */
function answerClientError(err: { code?: string }, socket: Duplex, limits: ListenerLimits) {
  if (answeredBadInput.has(socket)) return;
  answeredBadInput.add(socket);
  if (!socket.writable) return void socket.destroy();
  const a = err.code === 'HPE_HEADER_OVERFLOW'
    ? errorAnswer('ERR_SERVICE_703', `the request line and headers are larger than ${limits.maxHeaderBytes / 1024} KiB`)
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? errorAnswer('ERR_SERVICE_704', 'the request headers did not arrive in time')
      : errorAnswer('ERR_SERVICE_702', 'the request is not valid HTTP');
  answerRaw(socket, a);
}

/** An answer written on the raw connection, whose write side then closes; it is cut LINGER_MS later at the latest. */
function answerRaw(socket: Duplex, a: EdgeAnswer) {
  const body = Buffer.from(String(a.body ?? ''));
  const head = [`HTTP/1.1 ${a.status} ${http.STATUS_CODES[a.status] ?? ''}`, ...Object.entries(a.headers ?? {}).map(([k, v]) => `${k}: ${v}`), `${ERROR_CODE_HEADER}: ${a.code}`, `content-length: ${body.length}`, 'connection: close'];
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  socket.once('close', () => clearTimeout(timer));
  socket.end(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), body]));
}

/** A request whose head says no body follows: HTTP/2's stream ended with its headers, HTTP/1.1 without Content-Length (or 0) and Transfer-Encoding. */
function bodylessHead(req: http.IncomingMessage | http2.Http2ServerRequest, h1: boolean): boolean {
  if (!h1) return (req as http2.Http2ServerRequest).stream.endAfterHeaders;
  // From rawHeaders: req.headers is built on first use, which most requests never need.
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (name === 'transfer-encoding' || (name === 'content-length' && Number(raw[i + 1]) !== 0)) return false;
  }
  return true;
}

/** An HTTP/2 request's header list size as RFC 9113 (6.5.2) counts it: name, value and 32 bytes per field. */
function headerListBytes(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) n += raw[i].length + raw[i + 1].length + 32;
  return n;
}

export class IngressListener {
  readonly server: net.Server;
  private connections = new Set<net.Socket>();
  private terminators = new Map<string, tls.Server>();
  private h1Active = new Map<tls.TLSSocket, number>();
  private sessions = new Set<http2.ServerHttp2Session>();
  /** HTTP/1.1 connections' bytes (read + written) at the last sweep, and since when they stood still. */
  private activity = new Map<tls.TLSSocket, { bytes: number; at: number }>();
  /** HTTP/1.1 requests whose body is still coming: the connection's bytes read at the last sweep, and since when they stood still. */
  private bodies = new Map<tls.TLSSocket, { res: http.ServerResponse; bytes: number; at: number }>();
  /** Open connections per client address (client-relays.ts counts them as it counts relays). */
  private perClient: ClientRelays;
  private sweeper?: NodeJS.Timeout;
  /** The HTTP/1.1 server of a plain-HTTP listener (`--ingress-http`), made on first use. */
  private plainServer?: http.Server;
  private closing = false;
  address = '';

  constructor(readonly spec: IngressListenerSpec, private d: ListenerDeps) {
    this.server = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => void this.accept(socket));
    this.server.maxConnections = d.limits.maxConnections;
    this.perClient = new ClientRelays(d.limits.connectionsPerClient);
    this.server.on('drop', () => this.count('refused_max_connections'));
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      // The error names the listener it came from, so `serve` names its setting, not the API's (bin/serve-errors.ts).
      const failed = (e: Error) => reject(Object.assign(e, { ingressListener: { ...this.spec } }));
      this.server.once('error', failed);
      this.server.listen(this.spec.port, this.spec.host, () => {
        this.server.off('error', failed);
        resolve();
      });
    });
    const a = this.server.address() as net.AddressInfo;
    this.spec.port = a.port;
    const shortest = Math.min(this.d.limits.idleTimeoutMs, this.d.limits.bodyIdleTimeoutMs || Infinity);
    const every = Math.max(50, Math.min(1000, shortest / 4));
    this.sweeper = setInterval(() => this.sweepIdle(), every).unref();
    this.address = `${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  private count(outcome: string) {
    this.d.metrics.ingressConnections.inc({ port: String(this.spec.publicPort), outcome });
  }

  private async accept(socket: net.Socket) {
    const port = String(this.spec.publicPort);
    this.connections.add(socket);
    this.d.metrics.ingressOpen.inc({ port });
    socket.once('close', () => {
      this.connections.delete(socket);
      this.d.metrics.ingressOpen.dec({ port });
    });
    socket.on('error', () => {});
    if (this.closing) return void socket.destroy();
    const release = this.perClient.take(clientIpOf(socket));
    if (!release) {
      this.count('refused_connections_per_client');
      return void socket.destroy();
    }
    socket.once('close', release);
    const table = await this.d.live.current();
    const held = table.ports.get(this.spec.publicPort);
    // ACME validation (acme/intercept.ts) on the listeners for ports 80 and 443, unless a TCP edge holds the port whole (a plain-HTTP listener answers it per request).
    if (this.d.acme && !this.spec.plain && held?.kind !== 'tcp' && (await this.d.acme.take(socket, this.spec.publicPort))) return this.count('acme_challenge');
    if (held?.kind === 'tcp') {
      this.count('tcp');
      return streamEdge(socket, [...held.hosts.values()][0] as StreamEdgeEntry, table, this.streamDeps(), undefined);
    }
    // A TCP cloud endpoint at this public port (issue 36), where no edge holds the port: the port chooses (no name in TCP).
    const tcpCloud = held || this.spec.plain ? undefined : publicTcpCloudEndpoint(table, this.spec.publicPort);
    if (tcpCloud) {
      this.count('tcp');
      return this.cloudConnection(socket, tcpCloud, table, 'cloud-tcp');
    }
    if (this.spec.plain) {
      this.count('http');
      this.plainHttp().emit('connection', socket);
      // Paused on connect; the parser reads from the stream.
      return void socket.resume();
    }
    const hello = await readClientHello(socket, this.d.limits.handshakeTimeoutMs);
    if (!hello.ok) {
      // Plain HTTP (its first byte a method's capital letter, where TLS starts with 22) is told to use https.
      if (hello.reason === 'not_tls' && hello.bytes && hello.bytes[0] >= 65 && hello.bytes[0] <= 90) {
        this.count('refused_plain_http');
        return plainHttpOnTls(socket, hello.bytes, this.spec.publicPort);
      }
      this.count(`refused_${hello.reason}`);
      return void socket.destroy();
    }
    const now = await this.d.live.current();
    const entry = now.ports.get(this.spec.publicPort);
    // Without a server name there is no edge to choose: on a port of HTTPS edges, or of none yet,
    // the handshake shows a local-CA certificate for the address the client reached and a
    // request gets the 404 page (421 for a host an edge serves: that takes the name's own
    // handshake). A port of TLS edges only closes it: its clients need not speak HTTP.
    if (!hello.servername) {
      if (entry && entry.kind !== 'https') {
        this.count('refused_no_sni');
        return void socket.destroy();
      }
      this.count('https_no_sni');
      const address = String(socket.localAddress ?? '').replace(/^::ffff:/, '');
      APPLIED.set(socket, { name: '', key: terminationKey(DEFAULT_TERMINATION) });
      return void this.terminator('https', DEFAULT_TERMINATION, address || 'localhost').emit('connection', socket);
    }
    const edge = entry?.hosts.get(hello.servername);
    const endpoint = edge ? undefined : endpointTunnelFor(this.d.deps, hello.servername.toLowerCase());
    if (endpoint && this.d.deps.gateway.isTlsEndpoint(endpoint)) {
      this.count('tls');
      return passThroughTls(socket, pickEndpointTunnel(this.d.deps, hello.servername.toLowerCase()) ?? endpoint, this.d.deps, clientIpOf(socket));
    }
    // A TLS cloud endpoint at the name and this port (issue 36): its on_tcp_connect decides, the TLS passes through.
    const tlsCloud = edge || endpoint ? undefined : publicTlsCloudEndpoint(now, hello.servername.toLowerCase(), this.spec.publicPort);
    if (tlsCloud) {
      this.count('tls');
      return this.cloudConnection(socket, tlsCloud, now, 'cloud-tls', hello.servername);
    }
    // HTTPS and TLS edges share a port: the server name's edge decides which it is. A port with
    // no edges yet answers like a port of HTTPS edges: a handshake, then the 404 page. A cloud
    // endpoint's name is answered as HTTPS too (its policy answers; cloud-endpoints.ts).
    if (((!entry || entry.kind === 'https') && edge?.kind !== 'tls') || endpoint || (!edge && now.cloudEndpoints?.has(hello.servername.toLowerCase()))) {
      this.count('https');
      // An unknown name still gets a handshake (a local-CA certificate) and then a 404 page.
      const t = edge ? terminationOf(edge.doc) : DEFAULT_TERMINATION;
      APPLIED.set(socket, { name: hello.servername, key: terminationKey(t) });
      return void this.terminator('https', t).emit('connection', socket);
    }
    if (edge?.kind !== 'tls') {
      this.count('refused_unknown_host');
      return void socket.destroy();
    }
    this.count('tls');
    const at = edge.doc.tls_termination?.enabled === false ? 'edge' : (edge.doc.tls_termination?.terminate_at ?? 'edge');
    if (at !== 'edge') return streamEdge(socket, edge as StreamEdgeEntry, now, this.streamDeps(), hello.servername);
    const t = terminationOf(edge.doc);
    APPLIED.set(socket, { name: hello.servername, key: terminationKey(t) });
    this.terminator('tls', t).emit('connection', socket);
  }

  /**
   * Closes HTTP/1.1 connections that neither sent nor took a byte for idleTimeoutMs (a stalled
   * upload, an answer the client does not read), within a quarter of it (at most a second)
   * after: one pass over the connections, instead of a socket timeout re-armed on every read
   * and write of every request. An upgraded connection (WebSocket) is not swept.
   */
  private sweepIdle() {
    const now = performance.now();
    for (const [socket, seen] of this.activity) {
      const bytes = socket.bytesRead + socket.bytesWritten;
      if (bytes !== seen.bytes) {
        seen.bytes = bytes;
        seen.at = now;
      } else if (now - seen.at >= this.d.limits.idleTimeoutMs) {
        socket.destroy();
      }
    }
    for (const [socket, body] of this.bodies) {
      if (socket.bytesRead !== body.bytes) {
        body.bytes = socket.bytesRead;
        body.at = now;
      } else if (now - body.at >= this.d.limits.bodyIdleTimeoutMs) {
        this.bodies.delete(socket);
        this.bodyStalled(socket, body.res);
      }
    }
  }

  /**
   * An HTTP/1.1 request body that stopped coming: 408 ERR_SERVICE_861 written on the socket
   * itself when no answer has started (the handler's own answer then goes nowhere), and the
   * connection closed; what was relayed of it is cancelled with the response's close.
   */
  private bodyStalled(socket: tls.TLSSocket, res: http.ServerResponse) {
    this.count('body_stalled');
    if (res.headersSent || !socket.writable) return void socket.destroy();
    const a = errorAnswer('ERR_SERVICE_861', `no byte of the request body arrived for ${Math.round(this.d.limits.bodyIdleTimeoutMs / 1000)} s`);
    const body = Buffer.from(String(a.body ?? ''));
    const head = [`HTTP/1.1 ${a.status} ${http.STATUS_CODES[a.status] ?? ''}`, ...Object.entries(a.headers ?? {}).map(([k, v]) => `${k}: ${v}`), `${ERROR_CODE_HEADER}: ${a.code}`, `content-length: ${body.length}`, 'connection: close'];
    socket.end(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), body]));
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  }

  /** Watches a request's body until it has all come: HTTP/1.1 by the sweep, HTTP/2 by the stream's own timer. */
  private watchBody(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse, h1: boolean) {
    const idle = this.d.limits.bodyIdleTimeoutMs;
    if (idle <= 0 || req.complete || bodylessHead(req, h1)) return;
    if (h1) {
      const socket = req.socket as tls.TLSSocket;
      this.bodies.set(socket, { res: res as http.ServerResponse, bytes: socket.bytesRead, at: performance.now() });
      const done = () => { if (this.bodies.get(socket)?.res === res) this.bodies.delete(socket); };
      req.once('end', done);
      res.once('close', done);
      return;
    }
    const stream = (req as http2.Http2ServerRequest).stream;
    stream.setTimeout(idle, () => {
      this.count('body_stalled');
      stream.destroy(new Error('the request body stalled'));
    });
    req.once('end', () => stream.setTimeout(0));
  }

  /** A connection of a TCP or TLS cloud endpoint, with its access-log line as a TCP edge's (tcp.ts). */
  private cloudConnection(socket: net.Socket, entry: CloudEndpointEntry, table: IngressTable, kind: string, servername?: string) {
    const deps = this.streamDeps();
    const started = deps.now();
    const line: Record<string, unknown> = { msg: 'ingress connection', kind, public_port: deps.publicPort, client_ip: clientIpOf(socket), ...(servername ? { server_name: servername } : {}) };
    socket.once('close', () => deps.log({ level: 'info', ...line, bytes_in: socket.bytesRead, bytes_out: socket.bytesWritten, duration_ms: deps.now() - started }));
    connectCloudEndpoint(socket, entry, table, deps, line);
  }

  private streamDeps(): StreamDeps {
    return { ...this.d.deps, metrics: this.d.metrics, publicPort: this.spec.publicPort };
  }

  /**
   * The TLS server for one kind and termination, made on first use. With `noSni`, the one for
   * handshakes without a server name: its default certificate is the one for that address (a
   * local-CA leaf unless an upload covers it), made again when that certificate changes.
   */
  private terminator(kind: 'https' | 'tls', t: Termination, noSni?: string): tls.Server {
    const pair = noSni === undefined ? undefined : this.d.contexts.pairFor(noSni);
    const key = `${kind}|${terminationKey(t)}${pair ? `|${noSni}|${pair.id}` : ''}`;
    let server = this.terminators.get(key);
    if (server) return server;
    if (pair) {
      // The server of this address's previous certificate is forgotten (its connections keep it).
      for (const k of this.terminators.keys()) if (k.startsWith(`${kind}|${terminationKey(t)}|${noSni}|`)) this.terminators.delete(k);
    }
    const options = { ...this.d.contexts.serverOptions(t, this.d.limits.handshakeTimeoutMs), ...(pair ? { cert: pair.cert, key: pair.key } : {}) };
    if (kind === 'tls') {
      server = tls.createServer(options, (socket) => void this.tlsTerminated(socket));
    } else {
      const h2 = http2.createSecureServer({
        ...options,
        allowHTTP1: true,
        maxHeaderSize: this.d.limits.maxHeaderBytes,
        // HTTP/2 heads up to four times the limit reach request(), which answers 431 past the
        // limit (nghttp2 would only reset the stream); past that nghttp2 refuses them.
        settings: { maxHeaderListSize: 4 * this.d.limits.maxHeaderBytes, maxConcurrentStreams: this.d.limits.maxRequestsPerConnection },
        maxSessionMemory: 10,
        unknownProtocolTimeout: this.d.limits.handshakeTimeoutMs,
      } as http2.SecureServerOptions);
      const h1 = h2 as unknown as http.Server;
      h1.headersTimeout = this.d.limits.headersTimeoutMs;
      // No bound on a whole request: an upload on a slow link takes as long as it takes (Node's
      // 408 cut it at 60 s while it was still arriving); a stalled one is cut by the idle timeout.
      h1.requestTimeout = 0;
      h1.keepAliveTimeout = 5_000;
      // How often Node looks for connections past those timeouts (its default, 30 s, would let them run long past).
      (h1 as { connectionsCheckingInterval?: number }).connectionsCheckingInterval = Math.max(50, Math.min(1000, this.d.limits.headersTimeoutMs / 2));
      // The default answer is skipped on TLS sockets (they have written the handshake), so a client would get no answer at all.
      h2.on('clientError', (err: Error, socket: Duplex) => answerClientError(err as { code?: string }, socket, this.d.limits));
      h2.on('request', (req, res) => this.request(req, res));
      h2.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => void this.upgrade(req, socket, head));
      h2.on('session', (session) => {
        // Idle time: an HTTP/2 session by its own timer; HTTP/1.1 connections by sweepIdle,
        // since a socket timeout re-arms its timer on every read and write of every request.
        session.setTimeout(this.d.limits.idleTimeoutMs, () => session.destroy());
        this.sessions.add(session);
        session.once('close', () => this.sessions.delete(session));
        if (this.closing) session.close();
      });
      h2.on('secureConnection', (socket: tls.TLSSocket) => {
        if (!sameName(socket)) return this.nameChanged(socket);
        if (socket.alpnProtocol === 'h2') return;
        this.h1Active.set(socket, 0);
        this.activity.set(socket, { bytes: -1, at: 0 });
        socket.once('close', () => {
          this.h1Active.delete(socket);
          this.activity.delete(socket);
        });
      });
      h2.on('tlsClientError', () => this.count('refused_handshake'));
      // Node checks HTTP/1.1 header and request timeouts only for servers that emitted
      // 'listening'; this one never listens itself (the listener hands it connections).
      h2.emit('listening');
      server = h2;
    }
    if (kind === 'tls') server.on('tlsClientError', () => this.count('refused_handshake'));
    this.terminators.set(key, server);
    return server;
  }

  /** The HTTP/1.1 server of a plain-HTTP listener, with the limits of the TLS ones' HTTP/1.1. */
  private plainHttp(): http.Server {
    if (this.plainServer) return this.plainServer;
    const server = http.createServer({ maxHeaderSize: this.d.limits.maxHeaderBytes });
    server.headersTimeout = this.d.limits.headersTimeoutMs;
    server.requestTimeout = 0;
    server.keepAliveTimeout = 5_000;
    (server as { connectionsCheckingInterval?: number }).connectionsCheckingInterval = Math.max(50, Math.min(1000, this.d.limits.headersTimeoutMs / 2));
    server.on('clientError', (err: Error, socket: Duplex) => answerClientError(err as { code?: string }, socket, this.d.limits));
    server.on('connection', (socket: net.Socket) => {
      const s = socket as tls.TLSSocket;
      this.h1Active.set(s, 0);
      this.activity.set(s, { bytes: -1, at: 0 });
      socket.once('close', () => {
        this.h1Active.delete(s);
        this.activity.delete(s);
      });
    });
    server.on('request', (req, res) => this.request(req, res));
    server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => void this.upgrade(req, socket, head));
    // Node checks header timeouts only for servers that emitted 'listening' (this one is handed connections).
    server.emit('listening');
    return (this.plainServer = server);
  }

  /**
   * What a plain-HTTP listener does with a host: serve an agent's http endpoint; redirect a
   * name served over TLS (an https endpoint, an HTTPS edge on a TLS listener's port) to https;
   * anything else is not served here.
   */
  private plainTarget(table: HttpsContext['table'], host: string): { serve: true } | { redirectPort: number } | undefined {
    const endpoint = host ? endpointTunnelFor(this.d.deps, host) : undefined;
    const tlsPorts = this.d.tlsPorts ?? [];
    if (endpoint) {
      const proto = this.d.deps.gateway.endpointProto(endpoint);
      if (proto === 'http') return { serve: true };
      if (proto === 'https' && tlsPorts.length) return { redirectPort: tlsPorts.includes(443) ? 443 : tlsPorts[0] };
      return undefined;
    }
    for (const p of tlsPorts) {
      const held = table.ports.get(p);
      if (held?.kind === 'https' && held.hosts.get(host)?.kind === 'https') return { redirectPort: p };
    }
    return undefined;
  }

  /** An answer of a plain-HTTP listener for a host it does not serve: a redirect to https, or the 404 page. */
  private plainRefusal(req: http.IncomingMessage, host: string, target: { redirectPort: number } | undefined): EdgeAnswer {
    if (!target) return errorAnswer('ERR_SERVICE_740', `no http endpoint serves ${host || 'this host'} on port ${this.spec.publicPort}; edges are served over TLS (https://)`);
    const path = (req.url ?? '/').startsWith('/') ? req.url! : '/';
    const location = `https://${host}${target.redirectPort === 443 ? '' : `:${target.redirectPort}`}${path}`;
    return { status: 308, headers: { location, 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }, body: `308 Permanent Redirect\n\n${host} is served over TLS: ${location}\n` };
  }

  /** A request on a plain-HTTP listener (`--ingress-http`): its Host chooses (see plainTarget). */
  private plainRouted(req: http.IncomingMessage, res: http.ServerResponse, table: HttpsContext['table'], authority: string | undefined | null, startedAt: number): void {
    const socket = req.socket as tls.TLSSocket & { [PEER]?: { sni: string; clientIp: string } };
    const clientIp = (socket[PEER] ??= { sni: '', clientIp: clientIpOf(socket) }).clientIp;
    const host = authority ? hostOfAuthority(authority) : '';
    const done = { socket, h1: true, startedAt, edge: undefined };
    if (this.d.acme?.challenge(req, res, this.spec.publicPort)) return this.answered(done, 200);
    const target = this.plainTarget(table, host);
    if (target && 'serve' in target) {
      const ctx: ListenerContext = { table, edge: undefined, clientIp, publicPort: this.spec.publicPort, host, hostHeader: authority ?? host, deps: this.d.deps, answered: this.answered as unknown as HttpsContext['answered'], socket, h1: true, startedAt, scheme: 'http' };
      return this.handle(req, res, ctx);
    }
    const a = this.plainRefusal(req, host, target);
    res.writeHead(a.status, a.code ? { ...a.headers, [ERROR_CODE_HEADER]: a.code } : a.headers);
    res.end(a.body ?? '');
    this.answered(done, a.status);
  }

  /** An upgrade (WebSocket) on a plain-HTTP listener: an http endpoint's, or refused as a request would be. */
  private async plainUpgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer) {
    const authority = authorityOf(req, true);
    const table = await this.d.live.current();
    const host = authority ? hostOfAuthority(authority) : '';
    const invalid = hostHeaderInvalid(req, authority);
    const oversized = this.oversized(req, true) ?? (invalid ? undefined : authorityRefused(authority === null ? req.headers.host : authority, this.spec.publicPort));
    const target = invalid || oversized ? undefined : this.plainTarget(table, host);
    if (target && 'serve' in target) {
      const s = socket as tls.TLSSocket & { [PEER]?: { sni: string; clientIp: string } };
      const clientIp = (s[PEER] ??= { sni: '', clientIp: clientIpOf(socket) }).clientIp;
      return handleHttpsUpgrade(req, socket, head, { table, edge: undefined, clientIp, publicPort: this.spec.publicPort, host, hostHeader: authority ?? host, deps: this.d.deps, scheme: 'http' });
    }
    const res = new http.ServerResponse(req);
    res.assignSocket(socket);
    res.shouldKeepAlive = false;
    res.on('finish', () => socket.end());
    if (oversized) return writeAnswer(res, oversized);
    if (invalid) return badHost(res, authority === undefined ? 'none was sent' : 'several were sent');
    const a = this.plainRefusal(req, host, target);
    res.writeHead(a.status, a.code ? { ...a.headers, [ERROR_CODE_HEADER]: a.code } : a.headers);
    res.end(a.body ?? '');
  }

  /** A connection whose second ClientHello named another server than its first (see APPLIED): closed unread. */
  private nameChanged(socket: tls.TLSSocket) {
    this.count('refused_sni_changed');
    socket.destroy();
  }

  private async tlsTerminated(socket: tls.TLSSocket) {
    if (!sameName(socket)) return this.nameChanged(socket);
    const table = await this.d.live.current();
    const edge = table.ports.get(this.spec.publicPort)?.hosts.get(String(socket.servername || '').toLowerCase());
    if (!edge || edge.kind !== 'tls') return void socket.destroy();
    // The edge's client-certificate check or minimum version changed since this handshake: not under the old ones.
    if (terminationKeyOf(edge.doc) !== appliedKeyOf(socket)) return void socket.destroy();
    streamEdge(socket, edge, table, this.streamDeps(), String(socket.servername));
  }

  private contextOf(req: http.IncomingMessage | http2.Http2ServerRequest, table: HttpsContext['table'], sent: string | undefined | null, h1 = true, startedAt = 0): { ctx?: ListenerContext; sni: string; host: string; stale?: boolean } {
    const socket = req.socket as tls.TLSSocket & { [PEER]?: { sni: string; clientIp: string; applied?: string } };
    // The connection's name and client address, the same for each of its requests, and the
    // termination its handshake was made under (none when its name changed: see APPLIED).
    const peer = (socket[PEER] ??= { sni: String(socket.servername || '').toLowerCase(), clientIp: clientIpOf(socket), applied: sameName(socket) ? appliedKeyOf(socket) : undefined });
    const sni = peer.sni;
    // Several Host headers on HTTP/1.0: the first, as Node keeps it.
    const authority = sent === null ? req.headers.host : sent;
    const host = (authority === undefined ? '' : hostOfAuthority(authority)) || sni;
    const held = table.ports.get(this.spec.publicPort);
    // A connection opened without a server name reaches no edge or endpoint (their names take
    // their own handshakes, with their own checks): any other host gets the 404 page.
    if (sni === '' && host !== '' && (held?.hosts.has(host) || endpointTunnelFor(this.d.deps, host))) return { sni, host };
    if (host !== sni && sni !== '') return { sni, host };
    const named = held?.kind === 'https' ? held.hosts.get(host) : undefined;
    const edge = named?.kind === 'https' ? (named as HttpsEdgeEntry) : undefined;
    // The edge is the one whose certificate check and minimum version the handshake applied, or nothing is answered from it.
    if (peer.applied === undefined || terminationKeyOf(edge?.doc) !== peer.applied) return { sni, host, stale: true };
    return { sni, host, ctx: { table, edge, clientIp: peer.clientIp, publicPort: this.spec.publicPort, host, hostHeader: authority ?? host, deps: this.d.deps, answered: this.answered as unknown as HttpsContext['answered'], socket, h1, startedAt } };
  }

  private request(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void {
    const startedAt = performance.now();
    const socket = req.socket as tls.TLSSocket;
    const h1 = this.h1Active.has(socket);
    if (h1) {
      const active = (this.h1Active.get(socket) ?? 0) + 1;
      if (active > this.d.limits.maxRequestsPerConnection) {
        this.count('refused_pipelining');
        return void socket.destroy();
      }
      this.h1Active.set(socket, active);
      // While draining, each answer tells the client to take its next request elsewhere.
      if (this.closing) (res as http.ServerResponse).shouldKeepAlive = false;
    }
    this.watchBody(req, res, h1);
    const authority = authorityOf(req, h1);
    if (hostHeaderInvalid(req, authority)) return badHost(res as http.ServerResponse, authority === undefined ? 'none was sent' : 'several were sent');
    const oversized = this.oversized(req, h1) ?? authorityRefused(authority === null ? req.headers.host : authority, this.spec.publicPort);
    if (oversized) return refuse(res, oversized);
    // The table is a promise only while a reload is under way; otherwise no extra turn is taken.
    const table = this.d.live.current();
    if (table instanceof Promise) return void table.then((t) => this.routed(req, res, t, authority, h1, startedAt));
    this.routed(req, res, table, authority, h1, startedAt);
  }

  private routed(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse, table: HttpsContext['table'], authority: string | undefined | null, h1: boolean, startedAt: number): void {
    if (this.spec.plain) return this.plainRouted(req as http.IncomingMessage, res as http.ServerResponse, table, authority, startedAt);
    const { ctx, sni, host, stale } = this.contextOf(req, table, authority, h1, startedAt);
    if (stale) {
      refuse(res, errorAnswer('ERR_SERVICE_701', `this connection's TLS settings are not those ${sni} has now; open a new connection`));
      if (!h1) (req as http2.Http2ServerRequest).stream.session?.close();
      return this.answered({ socket: req.socket as tls.TLSSocket, h1, startedAt, edge: undefined }, res.statusCode);
    }
    if (ctx) {
      return this.handle(req, res, ctx);
    }
    misdirected(res, sni, host);
    this.answered({ socket: req.socket as tls.TLSSocket, h1, startedAt, edge: undefined }, res.statusCode);
  }

  /** A request answered (handler.ts calls it through HttpsContext.answered): one fewer in flight on its connection, and its metrics. */
  /** Hands a request to the HTTPS handler (TLS and plain listeners alike); it answers its own faults, and one before it had an exchange to answer with is answered 500 here. */
  private handle(req: Parameters<typeof handleHttpsRequest>[0], res: Parameters<typeof handleHttpsRequest>[1], ctx: ListenerContext) {
    try {
      handleHttpsRequest(req, res, ctx);
    } catch (e) {
      this.d.deps.log({ level: 'error', msg: `ingress: request failed: ${(e as Error)?.stack ?? e}` });
      if (res.headersSent) return void res.destroy();
      writeAnswer(res, errorAnswer('ERR_SERVICE_749', 'the edge could not handle this request; the server log has the details'));
      this.answered(ctx, res.statusCode);
    }
  }

  private readonly answered = (ctx: Pick<ListenerContext, 'socket' | 'h1' | 'startedAt' | 'edge'>, status: number) => {
    const active = ctx.h1 ? this.h1Active.get(ctx.socket) : undefined;
    if (active !== undefined) this.h1Active.set(ctx.socket, active - 1);
    this.d.metrics.observeIngress(ctx.edge?.doc.id ?? 'none', status, (performance.now() - ctx.startedAt) / 1000);
  };

  /** An answer for a request whose target or head is over the limits (HTTP/1.1's head is bounded by Node's parser). */
  private oversized(req: http.IncomingMessage | http2.Http2ServerRequest, h1: boolean): EdgeAnswer | undefined {
    const { maxUrlBytes, maxHeaderBytes } = this.d.limits;
    if (!h1 && headerListBytes(req.rawHeaders) > maxHeaderBytes) {
      return errorAnswer('ERR_SERVICE_703', `the request headers are larger than ${maxHeaderBytes / 1024} KiB`);
    }
    if ((req.url?.length ?? 0) > maxUrlBytes) return errorAnswer('ERR_SERVICE_845', `the request target is ${req.url!.length} bytes; this edge reads at most ${maxUrlBytes}`);
    return undefined;
  }

  private async upgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer) {
    this.activity.delete(socket as tls.TLSSocket);
    if (this.spec.plain) return this.plainUpgrade(req, socket, head);
    const authority = authorityOf(req, true);
    const { ctx, sni, host, stale } = this.contextOf(req, await this.d.live.current(), authority);
    if (stale) return void socket.destroy();
    const invalid = hostHeaderInvalid(req, authority);
    const oversized = this.oversized(req, true) ?? (invalid ? undefined : authorityRefused(authority === null ? req.headers.host : authority, this.spec.publicPort));
    if (!ctx || invalid || oversized) {
      const res = new http.ServerResponse(req);
      res.assignSocket(socket);
      res.shouldKeepAlive = false;
      res.on('finish', () => socket.end());
      if (oversized) return writeAnswer(res, oversized);
      return invalid ? badHost(res, authority === undefined ? 'none was sent' : 'several were sent') : misdirected(res, sni, host);
    }
    await handleHttpsUpgrade(req, socket, head, ctx);
  }

  /**
   * Stops accepting; HTTP/2 sessions get GOAWAY and HTTP/1.1 connections close once idle,
   * while requests and TCP/TLS streams in flight finish; what is left at the deadline is cut.
   */
  async drain(deadlineMs: number): Promise<void> {
    this.closing = true;
    clearInterval(this.sweeper);
    if (this.server.listening) this.server.close();
    for (const session of this.sessions) session.close();
    const deadline = Date.now() + deadlineMs;
    while (this.connections.size) {
      for (const [socket, active] of this.h1Active) if (active === 0) socket.end();
      if (Date.now() > deadline) for (const socket of this.connections) socket.destroy();
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

