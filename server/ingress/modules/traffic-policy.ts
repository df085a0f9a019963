// traffic_policy: the route's policy through the engine (server/policy). on_http_request runs
// before the backend (its header changes, URL rewrite and body rewrite go upstream, an ending
// action answers at the edge: a rate limit's 429 with retry-after); on_http_response sees the
// answer the client would get and may change or replace it, rewrite its body or compress it.
// Buckets and breakers are scoped by route id. A policy whose actions read the request body
// (verify-webhook, request-body-find-replace) has it read first, bounded as the webhook
// module's (WEBHOOK_BODY_LIMIT), and sent upstream from the buffer.
import { Transform } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { compilePolicy, evaluate, isCompiled, type CompiledPolicy, type Mutations, type PolicyResult } from '../../policy/index.js';
import { recordUpstream } from '../../policy/actions/run.js';
import { replaceMatches, replaceSseLine } from '../../policy/actions/service.js';
import { forwardInternal } from '../cloud-endpoints.js';
import type { Exchange, FilterFactory, IngressDeps } from '../types.js';
import { compressBody } from './compression.js';
import { WEBHOOK_BODY_LIMIT } from './webhook-verification.js';

export const PHASES = ['on_http_request', 'on_http_response'] as const;

/** Actions that read the request body: a policy with one reads it before on_http_request. */
const BODY_ACTIONS = new Set(['verify-webhook', 'request-body-find-replace']);


export function requestInput(ex: Exchange, body?: Buffer) {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(ex.req.headers)) if (v !== undefined && !k.startsWith(':')) headers[k] = v;
  const port = ex.publicPort === (ex.scheme === 'https' ? 443 : 80) ? '' : `:${ex.publicPort}`;
  return { method: ex.method, url: `${ex.scheme}://${ex.host}${port}${ex.path}`, headers, version: ex.req.httpVersion, ...(body ? { body } : {}) };
}

export function connectionInput(ex: Exchange) {
  const socket = ex.req.socket as Partial<TLSSocket> | undefined;
  const protocol = socket?.getProtocol?.();
  const tls = protocol
    ? {
        version: protocol.replace(/^TLSv/, ''),
        cipher_suite: socket?.getCipher?.()?.standardName ?? '',
        sni: typeof socket?.servername === 'string' ? socket.servername : '',
        negotiated_alpn: typeof socket?.alpnProtocol === 'string' ? socket.alpnProtocol : '',
        session_resumed: socket?.isSessionReused?.() ?? false,
        ...(() => {
          const cert = socket?.getPeerX509Certificate?.();
          return cert ? { client_certificate: cert } : {};
        })(),
      }
    : undefined;
  return { client_ip: ex.clientIp, server_port: ex.publicPort, client_port: socket?.remotePort, server_ip: socket?.localAddress, ...(tls ? { tls_version: tls.version, tls } : {}) };
}

export function applyRequest(ex: Exchange, m: Mutations['request']) {
  for (const name of m.remove_headers) delete ex.upstreamHeaders[name.toLowerCase()];
  for (const [name, value] of Object.entries(m.set_headers)) ex.upstreamHeaders[name.toLowerCase()] = value;
  if (m.url) {
    try {
      const u = new URL(m.url);
      ex.path = u.pathname + u.search;
    } catch { /* the engine only leaves URLs it could parse */ }
  }
  if (m.body !== undefined) {
    // The backend sends the buffered body (Exchange.body) instead of the stream.
    const body = Buffer.from(m.body);
    (ex as Exchange & { body?: Buffer }).body = body;
    if (ex.upstreamHeaders['content-length'] !== undefined) ex.upstreamHeaders['content-length'] = String(body.length);
  }
}

/** A transform that holds the whole body (bounded), then writes it with the replacements made. */
function replacingBody(m: NonNullable<Mutations['response']['find_replace']>): Transform {
  const chunks: Buffer[] = [];
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > WEBHOOK_BODY_LIMIT) return done(new Error(`the response body is over ${WEBHOOK_BODY_LIMIT} bytes, the most response-body-find-replace holds`));
      chunks.push(chunk);
      done();
    },
    flush(done) {
      let text = Buffer.concat(chunks).toString('utf8');
      for (const r of m) text = replaceMatches(r.from, text, r.to).text;
      done(null, Buffer.from(text));
    },
  });
}

export function applyResponse(ex: Exchange, m: Mutations['response']) {
  if (m.remove_headers.length || Object.keys(m.set_headers).length) {
    ex.onResponseHead((head) => {
      for (const name of m.remove_headers) delete head.headers[name.toLowerCase()];
      for (const [name, value] of Object.entries(m.set_headers)) head.headers[name.toLowerCase()] = value;
    });
  }
  const replace = m.find_replace;
  if (replace?.length) {
    ex.onResponseBody((head) => {
      delete head.headers['content-length'];
      return replacingBody(replace);
    });
  }
  const sse = m.sse_replace;
  if (sse?.length) {
    // sse-find-replace: each line of an event stream as it arrives (streaming kept: a line is written when its newline comes).
    ex.onResponseBody((head) => {
      if (!/^text\/event-stream/i.test(String(head.headers['content-type'] ?? ''))) return undefined;
      delete head.headers['content-length'];
      let partial = '';
      return new Transform({
        transform(chunk: Buffer, _enc, done) {
          const text = partial + chunk.toString('utf8');
          const end = text.lastIndexOf('\n');
          if (end < 0) {
            partial = text;
            if (partial.length > WEBHOOK_BODY_LIMIT) return done(new Error('an event-stream line over 10 MiB'));
            return done();
          }
          partial = text.slice(end + 1);
          done(null, Buffer.from(text.slice(0, end + 1).split('\n').map((l) => replaceSseLine(l, sse)).join('\n')));
        },
        flush(done) {
          done(null, partial ? Buffer.from(replaceSseLine(partial, sse)) : undefined);
        },
      });
    });
  }
  if (m.compress) {
    const encoding = m.compress as 'br' | 'gzip' | 'deflate';
    ex.onResponseBody((head) => compressBody(head, ex.method, encoding));
  }
}

export async function ended(ex: Exchange, r: PolicyResult, deps: IngressDeps): Promise<boolean> {
  if (r.outcome === 'continue') return false;
  if (r.outcome === 'answered') return true;
  if (r.outcome === 'close') {
    // close-connection: the client's connection ends without an answer.
    ex.answer({ status: 403, headers: { 'content-type': 'text/plain; charset=utf-8', connection: 'close' }, body: 'Forbidden\n' });
    ex.req.socket?.destroy();
  } else if ('forward_internal' in r.outcome) {
    // The internal endpoint's policy answers instead (cloud-endpoints.ts).
    await forwardInternal(ex, r.outcome.forward_internal.url, deps);
  } else ex.answer({ status: r.outcome.response.status, headers: r.outcome.response.headers, body: r.outcome.response.body });
  return true;
}

export const settled = async (r: PolicyResult): Promise<PolicyResult> => (r.pending ? settled(await r.pending) : r);

export function readsBody(policy: CompiledPolicy): boolean {
  return !!policy.phases.on_http_request?.some((rule) => rule.actions.some((a) => BODY_ACTIONS.has(a.type)));
}

export const trafficPolicy: FilterFactory = (config, route, deps) => {
  const policy = compilePolicy(String(config.value), { phases: PHASES, scope: route.id });
  if (!isCompiled(policy)) throw new Error(`the policy does not compile: ${policy.problems.map((p) => p.message).join('; ')}`);
  const onRequest = !!policy.phases.on_http_request?.length;
  const onResponse = !!policy.phases.on_http_response?.length;
  const body = readsBody(policy);
  const log = (m: Mutations) => {
    for (const metadata of m.logs ?? []) deps.log({ level: 'info', msg: 'traffic policy log action', route: route.id, metadata });
  };
  return {
    async handle(ex, next) {
      const conn = connectionInput(ex);
      let actions: PolicyResult['actions'] | undefined;
      let vars: PolicyResult['vars'] | undefined;
      let request: Mutations | undefined;
      if (onRequest) {
        const buffered = body ? await ex.readBody(WEBHOOK_BODY_LIMIT) : undefined;
        const r = await settled(evaluate(policy, 'on_http_request', { now: deps.now(), conn, endpoint: { id: route.id }, req: requestInput(ex, buffered) }, deps.policyState));
        actions = r.actions;
        vars = r.vars;
        request = r.mutations;
        log(r.mutations);
        if (await ended(ex, r, deps)) return;
        applyRequest(ex, r.mutations.request);
        applyResponse(ex, r.mutations.response);
      }
      try {
        await next();
      } finally {
        if (request) recordUpstream(request, deps.now(), ex.outcome ?? 'error');
      }
      const head = ex.responseHead;
      if (!onResponse || !head || ex.outcome === 'error') return;
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(head.headers)) if (v !== undefined) headers[k] = v;
      const r = await settled(evaluate(policy, 'on_http_response', { now: deps.now(), conn, endpoint: { id: route.id }, req: requestInput(ex), res: { status_code: head.status, headers }, actions, vars }, deps.policyState));
      log(r.mutations);
      if (await ended(ex, r, deps)) return;
      applyResponse(ex, r.mutations.response);
    },
  };
};
