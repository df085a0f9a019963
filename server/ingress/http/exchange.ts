// The Exchange one request travels in (types.ts): filters edit what goes upstream, answer at
// the edge, or register edits of the response; the backend leaves the upstream's head and
// body here; send() writes the final head and streams the body through the chosen transforms.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { pipeline, Readable, type Duplex, type Transform } from 'node:stream';
import type { ErrorCode } from '../../http/errors.js';
import type { EdgeAnswer, Exchange, FullDoc, IngressDeps, IngressTable, ResponseHead } from '../types.js';
import { errorAnswer, ERROR_CODE_HEADER } from './error-page.js';
import { responseHeadersOf } from './forwarded.js';

/** Thrown inside a filter or backend to answer with an edge error (the chain runner catches it). */
export class EdgeError extends Error {
  constructor(readonly answerWith: EdgeAnswer, readonly upstreamFailed = false) {
    super(String(answerWith.code ?? answerWith.status));
  }
}
export const edgeError = (code: ErrorCode, message: string, upstreamFailed = false, headers?: Record<string, string>) =>
  new EdgeError(errorAnswer(code, message, headers), upstreamFailed);

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
  upstreamHeaders: Record<string, string | string[]>;
  upgrade?: { socket: Duplex; head: Buffer; taken: boolean };
  connect: (ex: Exchange) => Promise<Duplex>;
}

export class HttpExchange implements Exchange {
  readonly req; readonly res; readonly clientIp; readonly host; readonly publicPort; readonly table; readonly edge; readonly route; readonly deps; readonly upgrade;
  readonly scheme = 'https' as const;
  method: string;
  path: string;
  upstreamHeaders: Record<string, string | string[]>;
  readonly locals: Record<string, unknown> = {};
  /** The buffered request body, when a filter read it; the backend sends it instead of the stream. */
  body?: Buffer;
  /** The response body: a buffer (edge answers) or the upstream's stream. */
  private responseBody?: Buffer | string | Readable;
  private head?: ResponseHead;
  private failed = false;
  private headEdits: ((head: ResponseHead) => void)[] = [];
  private bodyWraps: ((head: ResponseHead) => Transform | undefined)[] = [];
  private edgeAnswered = false;
  /** The code of the edge's own answer, if any, for the access log. */
  code?: string;
  private bodyRead?: Promise<Buffer>;
  private readonly connect: ExchangeInit['connect'];

  constructor(init: ExchangeInit) {
    this.req = init.req; this.res = init.res; this.clientIp = init.clientIp; this.host = init.host; this.publicPort = init.publicPort;
    this.table = init.table; this.edge = init.edge; this.route = init.route; this.deps = init.deps; this.upgrade = init.upgrade;
    this.method = init.method; this.path = init.path; this.upstreamHeaders = init.upstreamHeaders; this.connect = init.connect;
  }

  get responseHead() { return this.head; }
  get answered() { return this.edgeAnswered; }
  get outcome(): number | 'error' | undefined { return this.failed ? 'error' : this.head?.status; }

  readBody(limit: number): Promise<Buffer> {
    this.bodyRead ??= new Promise<Buffer>((resolve, reject) => {
      const declared = Number(this.req.headers['content-length'] ?? 0);
      if (declared > limit) return reject(edgeError('ERR_SERVICE_748', `the request body is ${declared} bytes; this route reads at most ${limit}`));
      const chunks: Buffer[] = [];
      let size = 0;
      const stream = this.req as Readable;
      const onData = (c: Buffer) => {
        size += c.length;
        if (size > limit) {
          stream.off('data', onData);
          stream.pause();
          reject(edgeError('ERR_SERVICE_748', `the request body is over ${limit} bytes, the most this route reads`));
        } else chunks.push(c);
      };
      stream.on('data', onData);
      stream.once('end', () => { this.body = Buffer.concat(chunks); resolve(this.body); });
      stream.once('error', reject);
    });
    return this.bodyRead;
  }

  onResponseHead(edit: (head: ResponseHead) => void) { this.headEdits.push(edit); }
  onResponseBody(wrap: (head: ResponseHead) => Transform | undefined) { this.bodyWraps.push(wrap); }

  answer(a: EdgeAnswer) {
    this.dropUpstreamBody();
    this.edgeAnswered = true;
    this.code = a.code;
    const headers: ResponseHead['headers'] = { ...(a.headers ?? {}) };
    if (a.code) headers[ERROR_CODE_HEADER] = a.code;
    const body = a.body ?? '';
    // Known before the response filters run: compression skips small bodies by it.
    headers['content-length'] = String(Buffer.byteLength(body));
    this.head = { status: a.status, headers };
    this.responseBody = body;
  }

  /** The backend failed (refused, timed out, no tunnel): answers the error; outcome is 'error'. */
  fail(a: EdgeAnswer) {
    this.answer(a);
    this.failed = true;
  }

  /** The upstream's answer, kept until the chain returns (on_http_response may still replace it). */
  respondUpstream(status: number, headers: Record<string, string | string[] | number | undefined>, body: Readable) {
    this.dropUpstreamBody();
    this.head = { status, headers: responseHeadersOf(headers) };
    this.responseBody = body;
  }

  /** The status of a passed-through upgrade, as the upstream answered it (for the log and filters). */
  respondStatus(status: number) {
    this.head = { status, headers: {} };
  }

  connectBackend(): Promise<Duplex> { return this.connect(this); }

  private dropUpstreamBody() {
    if (this.responseBody instanceof Readable) this.responseBody.destroy();
  }

  /** Writes the final head (after every edit) and the body through the chosen transforms; resolves with the bytes sent. */
  send(): Promise<number> {
    const head = this.head ?? { status: 502, headers: {} };
    for (const edit of this.headEdits) edit(head);
    const transforms = this.bodyWraps.map((w) => w(head)).filter((t): t is Transform => t !== undefined);
    const headers = responseHeadersOf(head.headers);
    const body = this.responseBody ?? '';
    const res = this.res as ServerResponse;
    if (!(body instanceof Readable) && transforms.length === 0) {
      const buf = typeof body === 'string' ? Buffer.from(body) : body;
      headers['content-length'] = String(buf.length);
      res.writeHead(head.status, headers);
      res.end(this.method === 'HEAD' ? undefined : buf);
      return Promise.resolve(buf.length);
    }
    const source = body instanceof Readable ? body : Readable.from([typeof body === 'string' ? Buffer.from(body) : body]);
    res.writeHead(head.status, headers);
    let bytes = 0;
    return new Promise((resolve) => {
      const last = transforms.length ? transforms[transforms.length - 1] : source;
      last.on('data', (c: Buffer) => { bytes += c.length; });
      pipeline([source, ...transforms, res as unknown as NodeJS.WritableStream], () => resolve(bytes));
    });
  }
}
