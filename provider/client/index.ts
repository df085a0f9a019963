// The API client: CRUD for every catalog kind, paging, retries that honour 429
// Retry-After, and one shared limiter. The reconciler and the Terraform provider use it.
import type { Agent, request } from 'undici';
import type { KindEntry } from '../catalog/index.js';
import { ApiClientError } from './errors.js';
import { Limiter } from './limiter.js';

export { ApiClientError, NO_SUCH_PATH } from './errors.js';

export interface ClientOptions {
  baseUrl: string;
  apiKey: string;
  /** Requests in flight at once (default 10). */
  concurrency?: number;
  /** Attempts per call for retryable failures (default 6). */
  attempts?: number;
  /** First backoff in ms (doubles each time; default 250). */
  backoffMs?: number;
  /** Longest single wait in ms (default 30 s). */
  maxWaitMs?: number;
  userAgent?: string;
}

type Doc = Record<string, any>;

/** The server's batch endpoint (docs/api.md, "Batches"). */
export const BATCH_PATH = '/_edgeform/batch';
/** Operations per batch at most (the server's bound). */
export const BATCH_MAX_OPERATIONS = 100;

/** One operation of a batch: the request it stands for. */
export interface BatchOperation {
  method: 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body?: Doc;
}

/** One operation's answer: the status and body the request alone would have had. */
export interface BatchResult {
  status: number;
  operation_id: string;
  body?: Doc;
}

/** Network errors after which the request certainly never reached the server. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);
const TRANSIENT = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);

/** The code of a network error (`ECONNREFUSED`, `UND_ERR_SOCKET`, ...), on the error or its cause. */
export function networkErrorCode(e: unknown): string | undefined {
  return (e as { code?: string }).code ?? (e as { cause?: { code?: string } }).cause?.code;
}

export class ApiClient {
  /** HTTP requests made (each retry counts). */
  calls = 0;
  /**
   * Whether the server has answered this client at all. Network errors are retried only
   * after it has: before, a refused or dropped connection is far likelier a wrong address
   * than a server restarting, and retrying would only delay the error (README, CLI reference).
   */
  answered = false;
  /** The id of the API key the server says this client authenticates with (its `Service-Api-Key-Id` header), once it has answered. */
  keyId?: string;
  readonly baseUrl: string;
  /** Told each time a 429 makes the client wait (the reconciler names the rate limit to the user). */
  onRateLimited?: (waitMs: number, e: ApiClientError) => void;
  private readonly limiter: Limiter;
  /** undici, loaded on the first call: `edgeform validate` makes none and starts faster without it. */
  private http?: Promise<{ agent: Agent; request: typeof request }>;

  constructor(private readonly opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.limiter = new Limiter(opts.concurrency ?? 10);
  }

  private undici() {
    return (this.http ??= import('undici').then((u) => ({ agent: new u.Agent({ connections: this.opts.concurrency ?? 10, keepAliveTimeout: 10_000 }), request: u.request })));
  }

  async close() {
    if (this.http) await (await this.http).agent.close();
  }

  /** One API call with retries; returns the parsed body (undefined for 204). */
  async call<T = Doc>(method: string, path: string, body?: unknown, opts: { retryTooMany?: boolean } = {}): Promise<T> {
    const attempts = this.opts.attempts ?? 6;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.limiter.run(() => this.once<T>(method, path, body));
      } catch (e) {
        // A budget counted in hours (secret fingerprints) is not worth waiting for: say so at once.
        if (opts.retryTooMany === false && e instanceof ApiClientError && e.status === 429) throw e;
        const wait = this.retryDelay(e, method, attempt);
        if (wait === undefined || attempt >= attempts) throw e;
        if (e instanceof ApiClientError && e.status === 429) {
          this.limiter.pause(wait);
          this.onRateLimited?.(wait, e);
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  private retryDelay(e: unknown, method: string, attempt: number): number | undefined {
    const backoff = Math.min((this.opts.backoffMs ?? 250) * 2 ** (attempt - 1), this.opts.maxWaitMs ?? 30_000);
    const jitter = (ms: number) => ms * (0.8 + Math.random() * 0.4);
    if (e instanceof ApiClientError) {
      if (!e.retryable()) return undefined;
      const after = Number(e.details.retry_after_header);
      return Number.isFinite(after) && after > 0 ? Math.min(after * 1000, this.opts.maxWaitMs ?? 30_000) : jitter(backoff);
    }
    if (!this.answered) return undefined;
    const code = networkErrorCode(e);
    if (code && NOT_SENT.has(code)) return jitter(backoff);
    if (code && TRANSIENT.has(code) && method !== 'POST') return jitter(backoff);
    return undefined;
  }

  private async once<T>(method: string, path: string, body?: unknown): Promise<T> {
    this.calls++;
    const url = path.startsWith('http') ? path : `${this.baseUrl}${path}`;
    const { agent, request } = await this.undici();
    const res = await request(url, {
      method: method as 'GET',
      dispatcher: agent,
      headers: {
        authorization: `Bearer ${this.opts.apiKey}`,
        'service-version': '2',
        'user-agent': this.opts.userAgent ?? 'edgeform-client',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    this.answered = true;
    const keyId = res.headers['service-api-key-id'];
    if (typeof keyId === 'string') this.keyId = keyId;
    const text = await res.body.text();
    if (res.statusCode >= 400) {
      let parsed: Doc = {};
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { msg: text.slice(0, 200) };
      }
      const details = { ...(parsed.details ?? {}), retry_after_header: res.headers['retry-after'] };
      throw new ApiClientError(method, path, res.statusCode, parsed.error_code, parsed.msg ?? `HTTP ${res.statusCode}`, parsed.details?.operation_id ?? (res.headers['service-operation-id'] as string | undefined), details);
    }
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** The collection path of a kind (with its parent id filled in for nested kinds). */
  collection(kind: KindEntry, parentId?: string): string {
    if (kind.parent?.in === 'path') {
      if (!parentId) throw new Error(`${kind.kind} needs its ${kind.parent.field}`);
      return kind.path.replace(`{${kind.parent.field}}`, parentId);
    }
    return kind.path;
  }

  item(kind: KindEntry, id: string, parentId?: string) {
    return `${this.collection(kind, parentId)}/${id}`;
  }

  create(kind: KindEntry, body: Doc, parentId?: string) {
    return this.call<Doc>('POST', this.collection(kind, parentId), body);
  }

  /** The resource, or undefined when it does not exist. */
  async get(kind: KindEntry, id: string, parentId?: string): Promise<Doc | undefined> {
    try {
      return await this.call<Doc>('GET', this.item(kind, id, parentId));
    } catch (e) {
      if (e instanceof ApiClientError && e.notFound()) return undefined;
      throw e;
    }
  }

  update(kind: KindEntry, id: string, patch: Doc, parentId?: string) {
    return this.call<Doc>('PATCH', this.item(kind, id, parentId), patch);
  }

  /** Deletes; a resource that is already gone counts as deleted (returns false). */
  async delete(kind: KindEntry, id: string, parentId?: string): Promise<boolean> {
    try {
      await this.call('DELETE', this.item(kind, id, parentId));
      return true;
    } catch (e) {
      if (e instanceof ApiClientError && e.notFound()) return false;
      throw e;
    }
  }

  putModule(kind: KindEntry, module: string, id: string, body: Doc, parentId?: string) {
    return this.call<Doc>('PUT', `${this.item(kind, id, parentId)}/${module}`, body);
  }

  async deleteModule(kind: KindEntry, module: string, id: string, parentId?: string): Promise<boolean> {
    try {
      await this.call('DELETE', `${this.item(kind, id, parentId)}/${module}`);
      return true;
    } catch (e) {
      if (e instanceof ApiClientError && e.notFound()) return false;
      throw e;
    }
  }

  /**
   * Up to BATCH_MAX_OPERATIONS writes in one request (POST /_edgeform/batch), each answered on
   * its own, in order. The request as a whole is retried as any POST is (a 429 waits for
   * Retry-After); its operations' errors are results, not thrown (operationError reads one).
   */
  async batch(operations: BatchOperation[]): Promise<BatchResult[]> {
    const answer = await this.call<{ results: BatchResult[] }>('POST', BATCH_PATH, { operations });
    if (answer?.results?.length !== operations.length) throw new Error(`POST ${BATCH_PATH}: the server answered ${answer?.results?.length ?? 'no'} results for ${operations.length} operations`);
    return answer.results;
  }

  /** A batch operation's error result as the error its request alone would have thrown. */
  operationError(op: BatchOperation, r: BatchResult): ApiClientError {
    const body = r.body ?? {};
    return new ApiClientError(op.method, op.path, r.status, body.error_code, body.msg ?? `HTTP ${r.status}`, body.details?.operation_id ?? r.operation_id, body.details ?? {});
  }

  /** Every item of a kind's list, following next_page_uri (100 per page). */
  async list(kind: KindEntry): Promise<Doc[]> {
    if (!kind.envelope) throw new Error(`${kind.kind} has no list endpoint`);
    const items: Doc[] = [];
    let next: string | null = `${kind.path}?limit=100`;
    while (next) {
      const page: Doc = await this.call<Doc>('GET', next);
      items.push(...page[kind.envelope]);
      next = page.next_page_uri;
    }
    return items;
  }
}
