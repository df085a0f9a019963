// The Exchange one request travels in (types.ts): filters edit what goes upstream, answer at
// the edge, or register edits of the response; the backend leaves the upstream's head and
// body here; send() writes the final head and streams the body through the chosen transforms.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { pipeline, Readable, type Duplex, type Transform } from 'node:stream';
import type { ErrorCode } from '../../http/errors.js';
import type { BufferBudget } from '../buffer-budget.js';
import type { EdgeAnswer, Exchange, FullDoc, IngressDeps, IngressTable, ResponseHead } from '../types.js';
import { backendAnswer, errorAnswer, ERROR_CODE_HEADER } from './error-page.js';
import { responseHeadersOf, upstreamHeadersOf } from './forwarded.js';

/** The default of `--ingress-upstream-idle-timeout`: as nginx's proxy_read_timeout. */
export const DEFAULT_UPSTREAM_IDLE_MS = 60_000;

/** The client connection a request came on: its HTTP/2 session, or its HTTP/1.1 socket. */
export function connectionOf(req: IncomingMessage | Http2ServerRequest): object | undefined {
  const stream = (req as Http2ServerRequest).stream;
  return (stream ? stream.session ?? stream : req.socket) ?? undefined;
}

/** A request body the edge may not buffer now: this connection holds its share (429), or the server all it may (503). */
export function bufferRefusal(bound: 'connection' | 'server', budget: BufferBudget): EdgeError {
  return bound === 'connection'
    ? edgeError('ERR_SERVICE_863', `this connection already has ${Math.round(budget.perConnection / 1048576)} MiB of request bodies buffered at the edge; send this request when those have been answered`, false, { 'retry-after': '1' })
    : edgeError('ERR_SERVICE_862', 'the edge is buffering as many request bodies as it may hold at once (--ingress-buffer-mib); retry in a moment', false, { 'retry-after': '1' });
}

/** Thrown inside a filter or backend to answer with an edge error (the chain runner catches it). */
export class EdgeError extends Error {
  constructor(readonly answerWith: EdgeAnswer, readonly upstreamFailed = false) {
    super(String(answerWith.code ?? answerWith.status));
  }
}
export const edgeError = (code: ErrorCode, message: string, upstreamFailed = false, headers?: Record<string, string>) =>
  new EdgeError(errorAnswer(code, message, headers), upstreamFailed);
/** An edge error about the route's backend: the code's summary to the client, `detail` (ids, labels) to the access log (backendAnswer). */
export const backendError = (code: ErrorCode, detail: string, upstreamFailed = true) => new EdgeError(backendAnswer(code, detail), upstreamFailed);

export interface ExchangeInit {
  req: IncomingMessage | Http2ServerRequest;
  res: ServerResponse | Http2ServerResponse;
  clientIp: string;
  host: string;
  publicPort: number;
  table: IngressTable;
  edge: FullDoc;
  route: FullDoc;
  deps: IngressDeps;
  method: string;
  path: string;
  /** The Host the upstream gets (and X-Forwarded-Host): the client's, or the edge's name. */
  hostHeader: string;
  /** How the client reached the edge (default https; http on a `--ingress-http` listener). */
  scheme?: 'https' | 'http';
  upgrade?: { socket: Duplex; head: Buffer; taken: boolean };
  connect: (ex: Exchange) => Promise<Duplex>;
}

/**
 * An answer given many times (an http_response backend's, made once per backend document):
 * its final headers are made once, and each request writes them as they are unless a filter
 * edits the head. The object is shared: nothing may change it after prepareAnswer.
 */
const prepared = new WeakMap<EdgeAnswer, { headers: Record<string, string | string[]>; length: number }>();

export function prepareAnswer(a: EdgeAnswer): EdgeAnswer {
  const body = a.body ?? '';
  const length = Buffer.byteLength(body);
  const headers: ResponseHead['headers'] = { ...(a.headers ?? {}) };
  if (a.code) headers[ERROR_CODE_HEADER] = a.code;
  headers['content-length'] = String(length);
  prepared.set(a, { headers: responseHeadersOf(headers), length });
  return a;
}

export class HttpExchange implements Exchange {
  readonly req; readonly res; readonly clientIp; readonly host; readonly publicPort; readonly table; readonly edge; readonly route; readonly deps; readonly upgrade;
  readonly scheme: 'https' | 'http';
  method: string;
  path: string;
  private upstream?: Record<string, string | string[]>;
  private readonly hostHeader: string;
  private localValues?: Record<string, unknown>;
  /** The buffered request body, when a filter read it; the backend sends it instead of the stream. */
  body?: Buffer;
  /** The response body: a buffer (edge answers) or the upstream's stream. */
  private responseBody?: Buffer | string | Readable;
  private head?: ResponseHead;
  /** The head's headers are a prepared answer's, shared with other requests: copied before any edit. */
  private headShared = false;
  private sharedLength = 0;
  private failed = false;
  /** Made by the first filter that registers one (most requests have none). */
  private headEdits?: ((head: ResponseHead) => void)[];
  private bodyWraps?: ((head: ResponseHead) => Transform | undefined)[];
  private edgeAnswered = false;
  /** The code of the edge's own answer, if any, for the access log. */
  code?: string;
  /** What the access log says besides the code (never sent to the client). */
  detail?: string;
  private bodyRead?: Promise<Buffer>;
  private readonly connect: ExchangeInit['connect'];

  constructor(init: ExchangeInit) {
    this.req = init.req; this.res = init.res; this.clientIp = init.clientIp; this.host = init.host; this.publicPort = init.publicPort;
    this.table = init.table; this.edge = init.edge; this.route = init.route; this.deps = init.deps; this.upgrade = init.upgrade;
    this.method = init.method; this.path = init.path; this.hostHeader = init.hostHeader; this.connect = init.connect;
    this.scheme = init.scheme ?? 'https';
  }

  /** What goes upstream: made from the client's headers on first use (an answer at the edge never needs them). */
  get upstreamHeaders(): Record<string, string | string[]> {
    return (this.upstream ??= upstreamHeadersOf(this.req.headers, this.clientIp, this.hostHeader, this.scheme));
  }
  set upstreamHeaders(headers: Record<string, string | string[]>) {
    this.upstream = headers;
  }

  get locals(): Record<string, unknown> {
    return (this.localValues ??= {});
  }

  get responseHead() {
    if (this.headShared && this.head) {
      this.head = { status: this.head.status, headers: { ...this.head.headers } };
      this.headShared = false;
    }
    return this.head;
  }
  /** The status of the response held so far (without copying a shared head). */
  get responseStatus(): number | undefined { return this.head?.status; }
  get answered() { return this.edgeAnswered; }
  get outcome(): number | 'error' | undefined { return this.failed ? 'error' : this.head?.status; }

  readBody(limit: number): Promise<Buffer> {
    this.bodyRead ??= new Promise<Buffer>((resolve, reject) => {
      const declared = Number(this.req.headers['content-length'] ?? 0);
      if (declared > limit) return reject(edgeError('ERR_SERVICE_748', `the request body is ${declared} bytes; this route reads at most ${limit}`));
      const chunks: Buffer[] = [];
      let size = 0;
      const stream = this.req as Readable;
      // What is buffered counts against the connection's and the server's bounds (buffer-budget.ts)
      // until the answer has gone; past either the request is refused before more is read.
      const budget = this.deps.buffers;
      const connection = budget && connectionOf(this.req);
      let taken = 0;
      if (budget && connection) (this.res as NodeJS.EventEmitter).once('close', () => budget.give(connection, taken));
      const onData = (c: Buffer) => {
        size += c.length;
        const refused = size > limit ? 'limit' : budget && connection ? budget.take(connection, c.length) : undefined;
        if (refused === undefined) {
          taken += c.length;
          return void chunks.push(c);
        }
        stream.off('data', onData);
        stream.pause();
        if (refused === 'limit') reject(edgeError('ERR_SERVICE_748', `the request body is over ${limit} bytes, the most this route reads`));
        else reject(bufferRefusal(refused, budget!));
      };
      stream.on('data', onData);
      stream.once('end', () => { this.body = Buffer.concat(chunks); resolve(this.body); });
      stream.once('error', reject);
    });
    return this.bodyRead;
  }

  onResponseHead(edit: (head: ResponseHead) => void) { (this.headEdits ??= []).push(edit); }
  onResponseBody(wrap: (head: ResponseHead) => Transform | undefined) { (this.bodyWraps ??= []).push(wrap); }

  answer(a: EdgeAnswer) {
    this.dropUpstreamBody();
    this.edgeAnswered = true;
    this.code = a.code;
    this.detail = a.detail;
    const ready = prepared.get(a);
    if (ready) {
      this.head = { status: a.status, headers: ready.headers };
      this.headShared = true;
      this.sharedLength = ready.length;
      this.responseBody = a.body ?? '';
      return;
    }
    this.headShared = false;
    const headers: ResponseHead['headers'] = { ...(a.headers ?? {}) };
    if (a.code) headers[ERROR_CODE_HEADER] = a.code;
    const body = a.body ?? '';
    // Known before the response filters run: compression skips small bodies by it.
    headers['content-length'] = String(Buffer.byteLength(body));
    this.head = { status: a.status, headers };
    this.responseBody = body;
  }

  /** An answer written in place of the head held (which the client's protocol refused), for the log and the outcome. */
  sentInstead(a: EdgeAnswer) {
    this.failed = true;
    this.code = a.code;
    this.detail = a.detail;
    this.head = { status: a.status, headers: {} };
    this.headShared = false;
  }

  /** The backend failed (refused, timed out, no tunnel): answers the error; outcome is 'error'. */
  fail(a: EdgeAnswer) {
    this.answer(a);
    this.failed = true;
  }

  /** The upstream's answer, kept until the chain returns (on_http_response may still replace it). */
  respondUpstream(status: number, headers: Record<string, string | string[] | number | undefined>, body: Readable) {
    this.dropUpstreamBody();
    this.headShared = false;
    this.head = { status, headers: responseHeadersOf(headers) };
    this.responseBody = body;
  }

  /** The status of a passed-through upgrade, as the upstream answered it (for the log and filters). */
  respondStatus(status: number) {
    this.headShared = false;
    this.head = { status, headers: {} };
  }

  connectBackend(): Promise<Duplex> { return this.connect(this); }

  private dropUpstreamBody() {
    if (this.responseBody instanceof Readable) this.responseBody.destroy();
  }

  /** Writes the final head (after every edit) and the body through the chosen transforms; resolves with the bytes sent. */
  send(): Promise<number> {
    const sent = this.sendNow();
    return typeof sent === 'number' ? Promise.resolve(sent) : sent;
  }

  /** send(), with the bytes at once when the body went out whole with the head (an answer at the edge). */
  sendNow(): number | Promise<number> {
    const res = this.res as ServerResponse;
    if (this.headShared && !this.headEdits && !this.bodyWraps) {
      // A prepared answer no filter edits: its headers as made, the body with them in one write.
      const head = this.head!;
      res.writeHead(head.status, head.headers as Record<string, string | string[]>);
      if (this.method === 'HEAD') { res.end(); return 0; }
      res.end(this.responseBody as string | Buffer);
      return this.sharedLength;
    }
    const head = this.responseHead ?? { status: 502, headers: {} };
    for (const edit of this.headEdits ?? []) edit(head);
    const transforms = this.bodyWraps ? this.bodyWraps.map((w) => w(head)).filter((t): t is Transform => t !== undefined) : [];
    const headers = responseHeadersOf(head.headers);
    const body = this.responseBody ?? '';
    if (!(body instanceof Readable) && transforms.length === 0) {
      // A string goes as it is: Node writes it with the head as one buffer.
      const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
      headers['content-length'] = String(length);
      res.writeHead(head.status, headers);
      if (this.method === 'HEAD') { res.end(); return 0; }
      res.end(body);
      return length;
    }
    if (body instanceof Readable && transforms.length === 0) return gatherAndSend(this, body, res, head.status, headers, this.method === 'HEAD');
    const source = body instanceof Readable ? body : Readable.from([typeof body === 'string' ? Buffer.from(body) : body]);
    if (!writeHeadOr502(this, res, head.status, headers)) {
      source.destroy();
      return 0;
    }
    return streamTo(this, source, transforms, res);
  }
}

/**
 * An upstream body of at most this many bytes that has arrived whole by the end of the event
 * loop's turn is sent with the head in one write (one TLS record, one system call), as an
 * edge answer is; a longer one, or one still coming, streams from there on.
 */
export const GATHER_LIMIT = 16 * 1024;

/** The client's connection of a response: its HTTP/2 session (or HTTP/1.1 socket), what is queued toward it, and how to close it. */
function clientSideOf(res: ServerResponse | Http2ServerResponse) {
  const stream = (res as Http2ServerResponse).stream;
  if (stream) {
    const session = stream.session;
    return { connection: (session ?? stream) as object, out: stream, close: () => (session ? session.destroy() : stream.destroy()) };
  }
  const socket = (res as ServerResponse).socket;
  return socket ? { connection: socket as object, out: res as ServerResponse, close: () => socket.destroy() } : undefined;
}

/** The source failed to send for the upstream idle timeout: it is cut, and the client sees the answer cut (item 7's rule). */
function onUpstreamIdle(source: Readable, out: { writableNeedDrain?: boolean }, timer: NodeJS.Timeout, idleMs: number, ex: HttpExchange) {
  // Waiting for the client (its side is full) is not the upstream's stall: the client's own timeouts apply.
  if (out.writableNeedDrain || source.isPaused() || source.readableLength > 0) return void timer.refresh();
  ex.code = 'ERR_SERVICE_744';
  ex.deps.log({ level: 'warn', msg: `ingress: the upstream sent nothing for ${Math.round(idleMs / 1000)} s in the middle of its answer; the answer was cut`, route: ex.route.id });
  source.destroy(new Error('the upstream stalled'));
}

/**
 * Streams `source` through `transforms` to the response; resolves with the body bytes sent.
 * While it streams, what it holds for the client is counted (UnreadAnswers, buffer-budget.ts),
 * and an upstream that sends nothing for the upstream idle timeout is cut.
 */
function streamTo(ex: HttpExchange, source: Readable, transforms: Transform[], res: ServerResponse): Promise<number> {
  let bytes = 0;
  return new Promise((resolve) => {
    const last = transforms.length ? transforms[transforms.length - 1] : source;
    const side = ex.deps.unread ? clientSideOf(res) : undefined;
    const untrack = side && ex.deps.unread!.track({ source, out: side.out, connection: side.connection, close: side.close });
    const idleMs = ex.deps.upstreamIdleMs ?? DEFAULT_UPSTREAM_IDLE_MS;
    const timer = idleMs > 0 ? setTimeout(() => onUpstreamIdle(source, (side?.out ?? res) as { writableNeedDrain?: boolean }, timer!, idleMs, ex), idleMs) : undefined;
    source.on('data', () => timer?.refresh());
    last.on('data', (c: Buffer) => { bytes += c.length; });
    pipeline([source, ...transforms, res as unknown as NodeJS.WritableStream], () => {
      clearTimeout(timer);
      untrack?.();
      resolve(bytes);
    });
  });
}

/**
 * Writes an upstream's head, or, when the client's protocol cannot carry it, the edge's 502
 * (ERR_SERVICE_743) instead; false then. HTTP/1.1 from the upstream parses what HTTP/2 to the
 * client refuses (a header that takes one value given twice, such as Content-Type), and Node
 * throws on it, here in an event handler, where it would end the whole server. The headers
 * the refused head set already go first (never the upstream's in an edge page).
 */
function writeHeadOr502(ex: HttpExchange, res: ServerResponse, status: number, headers: Record<string, string | string[]>): boolean {
  try {
    res.writeHead(status, headers);
    return true;
  } catch (e) {
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    const a = backendAnswer('ERR_SERVICE_743', `the upstream's answer cannot be sent to this client (${(e as Error).message})`);
    // The access log tells what the client got: the edge's 502 and its code, not the refused head.
    ex.sentInstead(a);
    const body = Buffer.from(a.body ?? '');
    res.writeHead(a.status, { ...a.headers, [ERROR_CODE_HEADER]: a.code!, 'content-length': String(body.length) });
    res.end(body);
    return false;
  }
}

/** Statuses whose responses carry no body, hence no Content-Length of one (RFC 9110 8.6). */
const bodyless = (status: number) => status < 200 || status === 204 || status === 304;

/**
 * Sends an upstream's answer: what of its body is already here by the end of this turn of the
 * event loop (up to GATHER_LIMIT) is held; if the body ended meanwhile it goes out with the
 * head in one write, with its Content-Length (the upstream's chunked framing is hop-by-hop,
 * so a whole body is framed by its length). Otherwise the head and what was held are written
 * and the rest streams, so a slow or endless body (server-sent events) is never held back
 * longer than one turn. An upstream that fails before its end cuts the response, as a failed
 * stream does; a client gone closes the upstream.
 */
function gatherAndSend(ex: HttpExchange, source: Readable, res: ServerResponse, status: number, headers: Record<string, string | string[]>, head: boolean): Promise<number> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      clearImmediate(turn);
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onFail);
      source.off('close', onFail);
      res.off('close', onGone);
    };
    const toStream = () => {
      stop();
      source.pause();
      if (!writeHeadOr502(ex, res, status, headers)) {
        source.destroy();
        return resolve(0);
      }
      for (const c of chunks) res.write(c);
      void streamTo(ex, source, [], res).then((rest) => resolve(size + rest));
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      size += c.length;
      if (size > GATHER_LIMIT) toStream();
    };
    const onEnd = () => {
      stop();
      if (!head && !bodyless(status) && headers['content-length'] === undefined) headers['content-length'] = String(size);
      if (!writeHeadOr502(ex, res, status, headers)) return resolve(0);
      res.end(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
      resolve(size);
    };
    const onFail = () => {
      stop();
      source.destroy();
      // With an error: an HTTP/2 client gets RST_STREAM (INTERNAL_ERROR), never a clean end.
      res.destroy(new Error('the upstream failed before the end of its answer'));
      resolve(size);
    };
    const onGone = () => {
      stop();
      source.destroy();
      resolve(0);
    };
    source.on('data', onData);
    source.once('end', onEnd);
    source.once('error', onFail);
    source.once('close', onFail);
    res.once('close', onGone);
    const turn = setImmediate(toStream);
  });
}
