// Pooled upstream connections of a tunnel, seen from the server. Each is a CONNECT stream on
// the agent's connection (the agent joins it to a TCP connection to the tunnel's forwards_to,
// as for TCP tunnels, and reads nothing of it) over which the server speaks HTTP/1.1 to the
// upstream itself, with an undici Client, one request at a time, kept alive between them.
// A relayed HTTP request takes an idle one and gives it back when its answer has ended; with
// none idle it goes as its own HTTP/2 stream (connection.ts openStream) while one more is
// opened for the next, so nothing ever waits for a pooled connection. One that closes (the
// upstream closed it, a request was cancelled, the session ended) leaves the pool.
//
// Why: a relayed request as its own stream costs Node's HTTP/2 client about 40 µs in the server
// (ClientHttp2Session.request) and the agent a full HTTP/2 server request and an undici one;
// a pooled one costs the server one HTTP/1.1 exchange on a stream that exists already, and the
// agent two socket writes (bench/README.md).
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { Readable } from 'node:stream';
import type { Client, Dispatcher } from 'undici';
import { HELD, type HoldingSource } from '../ingress/buffer-budget.js';

/** Pooled connections per tunnel of a session, at most (--agent-relay-pool, EDGEFORM_AGENT_RELAY_POOL). */
export const DEFAULT_RELAY_POOL = 16;
/** An idle pooled connection is closed (without a reset) after this long: under Node's 5 s keep-alive, so the upstream rarely closes one first. */
export const IDLE_MS = 2000;
/** A retired connection the agent has not closed by then is closed from here. */
const RETIRE_MS = 5000;
/** After a pooled connection could not be opened (the upstream refused), none is tried for this long. */
export const RETRY_OPEN_MS = 1000;
/** Undici's own idle limit, over IDLE_MS (the sweep closes them gently first); an upstream's Keep-Alive hint still counts, less this margin. */
const KEEP_ALIVE = { keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000, keepAliveTimeoutThreshold: 1000 };

let undici: Promise<typeof import('undici')> | undefined;
/** undici, loaded when the first pooled connection opens: loading it was a tenth of a CPU second or more of every serve start (issue 29). */
const loadUndici = () => (undici ??= import('undici'));

/**
 * A CONNECT stream to a tunnel's upstream once the agent answered 200 (it reached the
 * upstream): the stream a pooled connection speaks over. Fails (and cancels the stream) when
 * the agent answered otherwise, the stream closed, or `timeoutMs` passed first.
 */
export function upstreamReached(stream: ClientHttp2Stream, timeoutMs: number): Promise<ClientHttp2Stream> {
  return new Promise((resolve, reject) => {
    stream.on('error', () => {});
    const done = (ok: boolean) => {
      clearTimeout(timer);
      stream.off('response', onResponse);
      stream.off('close', onClose);
      if (ok) return resolve(stream);
      if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
      reject(new Error('the agent did not reach the upstream'));
    };
    const onResponse = (h: IncomingHttpHeaders) => done(Number(h[':status']) === 200);
    const onClose = () => done(false);
    const timer = setTimeout(done, timeoutMs, false);
    stream.on('response', onResponse);
    stream.on('close', onClose);
  });
}

/** One CONNECT stream to the upstream and the HTTP/1.1 client that speaks over it. */
export class PooledConnection {
  readonly client: Client;
  idleSince = 0;
  private closed = false;
  constructor(readonly stream: ClientHttp2Stream, private readonly pool: RelayPool, UndiciClient: typeof Client) {
    let given = false;
    this.client = new UndiciClient('http://upstream.invalid', {
      // The stream is open already; undici asks once. (Not synchronously: undici is still in
      // its resume loop when it asks, and would not notice the connection until later.)
      connect: (_opts, cb) => {
        if (given || stream.destroyed) return cb(new Error('the pooled connection closed'), null);
        given = true;
        process.nextTick(cb, null, stream as never);
      },
      pipelining: 1,
      headersTimeout: 0,
      bodyTimeout: 0,
      ...KEEP_ALIVE,
    });
    this.client.on('disconnect', () => this.close());
    stream.on('close', () => this.close());
  }

  /** Back to the pool once its answer has ended (unless it closed meanwhile). */
  release() {
    if (this.closed || this.stream.destroyed) return;
    this.idleSince = Date.now();
    this.pool.idle.push(this);
  }

  /** An idle one ends its half of the stream: the agent closes the upstream connection, and the stream closes without a reset. */
  retire() {
    this.pool.forget(this);
    this.stream.end();
    setTimeout(() => this.close(), RETIRE_MS).unref();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.pool.forget(this);
    void this.client.destroy().catch(() => {});
  }
}

export class RelayPool {
  readonly all = new Set<PooledConnection>();
  /** Idle connections, the most recently used last (taken first, so the others age out). */
  readonly idle: PooledConnection[] = [];
  private opening = 0;
  private retryAt = 0;
  private sweeper?: NodeJS.Timeout;
  private ended = false;

  /** @param open a CONNECT stream to the tunnel's upstream, once the agent reached it. */
  constructor(private readonly max: number, private readonly open: () => Promise<ClientHttp2Stream>) {}

  get size() { return this.all.size; }

  /** An idle connection, out of the pool until its request ends; undefined when none is idle (one more is opened if the pool has room). */
  take(): PooledConnection | undefined {
    const c = this.idle.pop();
    if (c) return c;
    if (!this.ended && this.all.size + this.opening < this.max && Date.now() >= this.retryAt) this.grow();
    return undefined;
  }

  private grow() {
    this.opening++;
    Promise.all([this.open(), loadUndici()]).then(([stream, { Client }]) => {
      this.opening--;
      if (this.ended) return void stream.close();
      const c = new PooledConnection(stream, this, Client);
      this.all.add(c);
      c.release();
      this.sweep();
    }, () => {
      this.opening--;
      this.retryAt = Date.now() + RETRY_OPEN_MS;
    });
  }

  forget(c: PooledConnection) {
    this.all.delete(c);
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
  }

  /** Retires connections idle for IDLE_MS; runs while the pool holds any. */
  private sweep() {
    if (this.sweeper || this.ended) return;
    this.sweeper = setInterval(() => {
      const before = Date.now() - IDLE_MS;
      // Oldest first: the front of the list was released longest ago.
      while (this.idle.length && this.idle[0].idleSince <= before) this.idle[0].retire();
      if (!this.all.size) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, IDLE_MS / 2);
    this.sweeper.unref();
  }

  /** The session ended: every connection goes (their streams go with the session). */
  closeAll() {
    this.ended = true;
    clearInterval(this.sweeper);
    for (const c of [...this.all]) c.close();
  }
}

export type PooledHeaders = Record<string, string | string[] | undefined>;

/** Errors of a pooled answer's body are seen by whoever reads it (its close), as a relayed stream's are. */
function ignore() {}

/**
 * A pooled answer's body: read as undici delivers it; destroyed before its end, it cancels the
 * request. It may fail before anyone reads it (a bad chunk right after the head, parsed with
 * it): its error must not be an uncaught one, which would end the whole server.
 */
class PooledBody extends Readable {
  constructor(private readonly request: PooledRequest, private readonly controller: Dispatcher.DispatchController, stream: ClientHttp2Stream) {
    super();
    this.on('error', ignore);
    // What waits behind this body, unread, in the stream from the agent (buffer-budget.ts counts it).
    (this as HoldingSource)[HELD] = () => stream.readableLength;
  }
  override _read() { this.controller.resume(); }
  override _destroy(err: Error | null, cb: (err?: Error | null) => void) {
    this.request.cancel();
    cb(err);
  }
}

/**
 * One relayed request over a pooled connection, as an undici dispatch handler: the answer's
 * head goes to `head()` with its body as a Readable fed as undici reads it (undici pauses
 * while the reader is full and resumes when it reads); a failure before the head goes to
 * `failed()`. Cancelling (the client went away, the upstream was late) aborts the request,
 * which closes its connection: the agent closes the upstream connection with it. Subclasses
 * say what a head and a failure mean (methods, not closures: this runs for every request).
 */
export abstract class PooledRequest implements Dispatcher.DispatchHandler {
  private controller?: Dispatcher.DispatchController;
  private body?: PooledBody;
  private ended = false;
  constructor(protected readonly pooled: PooledConnection) {}

  /** The answer's head arrived; `body` streams the rest. */
  protected abstract head(status: number, headers: PooledHeaders, body: Readable): void;
  /** The connection failed before any answer. */
  protected abstract failed(e: Error): void;
  /** Whether the request's body has all gone: an upstream may answer before it has, and then the connection is not reused. */
  protected bodySent(): boolean { return true; }

  cancel() {
    if (this.ended) return;
    this.ended = true;
    this.controller?.abort(new Error('the relayed request was cancelled'));
    this.pooled.close();
  }

  onRequestStart(c: Dispatcher.DispatchController) {
    this.controller = c;
    if (this.ended) c.abort(new Error('the relayed request was cancelled'));
  }

  onResponseStart(c: Dispatcher.DispatchController, status: number, headers: PooledHeaders) {
    // An informational answer (103 Early Hints) before the answer: skipped, as a relayed
    // stream's are (undici reads no body for it and goes on to the answer). Not the answer's head.
    if (status < 200) return;
    // HTTP/1.1 parses any three digits, an HTTP/2 response takes 200-599 (Node throws on more,
    // from deep in the send): no client can be sent it. A failed answer, as the agent makes it
    // on a stream.
    if (status > 599) return c.abort(new Error(`the upstream answered with status ${status}`));
    this.body = new PooledBody(this, c, this.pooled.stream);
    this.head(status, headers, this.body);
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer) {
    if (!this.body!.push(chunk)) c.pause();
  }

  onResponseEnd() {
    if (this.ended) return;
    this.ended = true;
    if (this.bodySent()) this.pooled.release();
    else this.pooled.close();
    this.body!.push(null);
  }

  onResponseError(_c: Dispatcher.DispatchController, e: Error) {
    if (this.ended) return;
    this.ended = true;
    this.pooled.close();
    if (this.body) this.body.destroy(e);
    else this.failed(e);
  }
}
