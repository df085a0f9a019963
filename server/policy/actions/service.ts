// The runners of the service's actions beyond SPEC's first eight (configs checked in
// provider/catalog/validate/policy/actions/service.ts). Where a route module does the same
// thing, the runner calls the module's code (webhook schemes, the circuit breaker's state
// machine, the compression choice): one implementation per behaviour.
import { timingSafeEqual } from 'node:crypto';
import { createLocalJWKSet, createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';
import type * as A from '../../../provider/catalog/validate/policy/actions/index.js';
import { Re2Pattern } from '../../../provider/catalog/validate/regex.js';
import { PROVIDERS, type WebhookProvider } from '../../ingress/modules/webhooks/providers.js';
import { actionOutput, headerOf } from '../context.js';
import { expand, expandAll, respond, type ActionRun, type RunContext, type Runner, type RunnerFactory } from './run.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A value of the configuration with every string expanded (at any depth). */
function expandDeep(ctx: RunContext, v: unknown): unknown {
  if (typeof v === 'string') {
    const t = ctx.templates.get(v);
    if (!t) return v;
    // A field that is one interpolation and nothing else keeps the expression's value and type (set-vars: ${int(50.5)} is an int).
    return t.single ? t.single(ctx.vars) : t(ctx.vars);
  }
  if (Array.isArray(v)) return v.map((x) => expandDeep(ctx, x));
  if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, expandDeep(ctx, x)]));
  // A YAML integer is a CEL int (vars.sample_list[0] == 1), other numbers doubles.
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  return v;
}

export const log: RunnerFactory = (config: A.LogAction): Runner => (ctx) => {
  const metadata = expandDeep(ctx, config.metadata) as Record<string, unknown>;
  (ctx.mutations.logs ??= []).push(metadata);
  actionOutput(ctx.vars, 'log').metadata = metadata;
  return { did: `log: ${JSON.stringify(metadata, (_k, v) => (typeof v === 'bigint' ? Number(v) : v))}` };
};

export const setVars: RunnerFactory = (config: A.SetVarsAction): Runner => (ctx) => {
  const vars = ctx.vars.vars;
  for (const [name, value] of config.vars) vars[name] = expandDeep(ctx, value);
  return { did: `set-vars: ${config.vars.map(([k]) => k).join(', ')}` };
};

export const closeConnection: RunnerFactory = (): Runner => (ctx) => {
  actionOutput(ctx.vars, 'close_connection').closed = true;
  return { ended: 'close', did: 'close-connection: connection closed' };
};

const same = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

export const basicAuth: RunnerFactory = (config: A.BasicAuthAction): Runner => (ctx) => {
  const header = headerOf(ctx.vars.req!, 'authorization')?.[0] ?? '';
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  const decoded = m ? Buffer.from(m[1], 'base64').toString('utf8') : '';
  const colon = decoded.indexOf(':');
  const username = colon > 0 ? decoded.slice(0, colon) : '';
  const password = colon > 0 ? decoded.slice(colon + 1) : '';
  // Every credential is compared, so the time taken does not tell which username exists.
  let authorized = false;
  for (const c of config.credentials) if (same(c.username, username) && same(c.password, password) && colon > 0) authorized = true;
  const out = actionOutput(ctx.vars, 'basic_auth');
  out.credentials = { presented: !!m, username, authorized };
  if (authorized || !config.enforce) return { did: `basic-auth: ${m ? `user ${JSON.stringify(username)} ${authorized ? 'authorized' : 'not authorized (enforce: false)'}` : 'no credentials (enforce: false)'}` };
  return {
    ended: respond(401, 'Unauthorized\n', { 'www-authenticate': `Basic realm="${config.realm.replace(/"/g, '')}", charset="UTF-8"` }),
    did: `basic-auth: ${m ? `user ${JSON.stringify(username)} not authorized` : 'no credentials'}; 401`,
  };
};

/** One JWKS fetcher per URL for the process (jose caches the keys and refetches on an unknown kid, with its own timeout). */
const remoteSets = new Map<string, JWTVerifyGetKey>();
const remoteSet = (url: string) => remoteSets.get(url) ?? remoteSets.set(url, createRemoteJWKSet(new URL(url), { timeoutDuration: 5000, cooldownDuration: 30_000 })).get(url)!;

function tokenOf(ctx: RunContext, t: A.JwtToken): string | undefined {
  const req = ctx.vars.req!;
  if (t.method === 'body') return undefined;
  const raw = t.method === 'header' ? headerOf(req, t.name.toLowerCase())?.[0] : t.method === 'query' ? req.query[t.name]?.[0] : (req.cookies as Record<string, { value: string }[]>)[t.name]?.[0]?.value;
  if (raw === undefined) return undefined;
  if (t.prefix && !raw.startsWith(t.prefix)) return undefined;
  return raw.slice(t.prefix.length).trim();
}

export const jwtValidation: RunnerFactory = (config: A.JwtValidationAction): Runner => {
  const local = config.keys.length ? createLocalJWKSet({ keys: config.keys as never }) : undefined;
  const sets = [...(local ? [local] : []), ...config.jkus.map((u) => () => remoteSet(u))];
  const keyOf: JWTVerifyGetKey = async (header, token) => {
    let last: unknown;
    for (const s of sets) {
      try {
        const get = s === local ? local! : (s as () => JWTVerifyGetKey)();
        return await get(header, token);
      } catch (e) {
        last = e;
      }
    }
    throw last ?? new Error('no key matches the token');
  };
  const fail = (ctx: RunContext, code: string, message: string): Omit<ActionRun, 'pending'> => {
    const out = actionOutput(ctx.vars, 'jwt_validation');
    out.error = { code, message };
    if (!config.enforce) return { did: `jwt-validation: ${message} (enforce: false)` };
    return { ended: respond(401, 'Unauthorized\n', { 'www-authenticate': `Bearer error="invalid_token", error_description="${message.replace(/"/g, "'")}"` }), did: `jwt-validation: ${message}; 401` };
  };
  return (ctx) => {
    const token = config.tokens.map((t) => tokenOf(ctx, t)).find((t) => t !== undefined && t !== '');
    if (!token) return fail(ctx, 'ERR_NGROK_3401', 'no token in the request');
    const pending = jwtVerify(token, keyOf, { issuer: config.issuers, audience: config.audiences, algorithms: config.algorithms }).then(
      ({ payload, protectedHeader }) => {
        actionOutput(ctx.vars, 'jwt_validation').tokens = [{ header: protectedHeader, claims: payload }];
        return { did: `jwt-validation: token valid (sub ${JSON.stringify(payload.sub ?? '')})` };
      },
      (e: Error) => fail(ctx, 'ERR_NGROK_3402', `the token is not valid: ${e.message}`),
    );
    return { did: 'jwt-validation: verifying', pending };
  };
};

export const verifyWebhook: RunnerFactory = (config: A.VerifyWebhookAction): Runner => {
  const scheme = PROVIDERS[config.provider as WebhookProvider];
  return (ctx) => {
    const req = ctx.vars.req!;
    const headers: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = v.join(', ');
    const input = (ctx.vars as unknown as { input: { req?: { body?: string | Buffer } } }).input;
    const body = input.req?.body;
    const settle = (ok: boolean, detail: string): Omit<ActionRun, 'pending'> => {
      const out = actionOutput(ctx.vars, 'verify_webhook');
      out.verified = ok;
      out.error = ok ? { code: '', message: '' } : { code: 'ERR_NGROK_3101', message: detail };
      if (ok) return { did: `verify-webhook (${config.provider}): verified` };
      if (!config.enforce) return { did: `verify-webhook (${config.provider}): ${detail} (enforce: false)` };
      return { ended: respond(403, `Webhook verification (${config.provider}) refused the request: ${detail}.\n`), did: `verify-webhook (${config.provider}): ${detail}; 403` };
    };
    const pending = Promise.resolve(scheme.verify({ method: req.method, url: req.url$, headers, body: body === undefined ? Buffer.alloc(0) : Buffer.from(body), now: ctx.now }, expand(ctx, config.secret))).then(
      (v) => (v.ok ? settle(true, '') : settle(false, v.detail)),
      (e: Error) => settle(false, `the signature could not be checked (${e.message})`),
    );
    return { did: 'verify-webhook: verifying', pending };
  };
};

const patterns = new Map<string, Re2Pattern>();
function patternOf(ctx: RunContext, from: Re2Pattern | string): Re2Pattern {
  if (typeof from !== 'string') return from;
  const source = expand(ctx, from);
  let p = patterns.get(source);
  if (!p) {
    p = new Re2Pattern(source);
    if (patterns.size > 256) patterns.clear();
    patterns.set(source, p);
  }
  return p;
}

/** Every match of `p` in `text` replaced by `to` (its groups as $1, $<name>, as url-rewrite's): the body and event-stream find-replace actions, here and in the ingress. */
export function replaceMatches(p: Re2Pattern, text: string, to: string): { text: string; count: number } {
  const m = p.re.matcher(text);
  let out = '';
  let last = 0;
  let count = 0;
  while (m.find()) {
    count++;
    const start = m.start();
    const end = m.end();
    out += text.slice(last, start) + p.replace(text.slice(start, end), to);
    // An empty match moves on by one character, kept as it was.
    if (end === start) out += text.slice(start, start + 1);
    last = end === start ? end + 1 : end;
    if (last > text.length) break;
  }
  return { text: out + text.slice(Math.min(last, text.length)), count };
}

/** Each replacement in order over the whole text. */
function replaceAll(ctx: RunContext, text: string, replacements: A.Replacement[]): { text: string; count: number } {
  let count = 0;
  let out = text;
  for (const r of replacements) {
    const done = replaceMatches(patternOf(ctx, r.from), out, expand(ctx, r.to));
    out = done.text;
    count += done.count;
  }
  return { text: out, count };
}

const bodyText = (b: string | Buffer | undefined) => (b === undefined ? undefined : typeof b === 'string' ? b : b.toString('utf8'));

export const requestBodyFindReplace: RunnerFactory = (config: A.FindReplaceAction): Runner => (ctx) => {
  const input = (ctx.vars as unknown as { input: { req?: { body?: string | Buffer } } }).input;
  const body = ctx.mutations.request.body ?? bodyText(input.req?.body);
  if (body === undefined) return { did: 'request-body-find-replace: no request body here; unchanged' };
  const r = replaceAll(ctx, body, config.replacements);
  ctx.mutations.request.body = r.text;
  actionOutput(ctx.vars, 'request_body_find_replace').replaced = BigInt(r.count);
  return { did: `request-body-find-replace: ${r.count} replacement${r.count === 1 ? '' : 's'}` };
};

export const responseBodyFindReplace: RunnerFactory = (config: A.FindReplaceAction): Runner => (ctx) => {
  const input = (ctx.vars as unknown as { input: { res?: { body?: string | Buffer } } }).input;
  const body = ctx.mutations.response.body ?? bodyText(input.res?.body);
  if (body === undefined) {
    // The ingress reads the upstream's body as it streams: it applies the replacements itself.
    (ctx.mutations.response.find_replace ??= []).push(...config.replacements.map((r) => ({ from: patternOf(ctx, r.from), to: expand(ctx, r.to) })));
    return { did: 'response-body-find-replace: applied to the body as it streams' };
  }
  const r = replaceAll(ctx, body, config.replacements);
  ctx.mutations.response.body = r.text;
  actionOutput(ctx.vars, 'response_body_find_replace').replaced = BigInt(r.count);
  return { did: `response-body-find-replace: ${r.count} replacement${r.count === 1 ? '' : 's'}` };
};

/** One line of an event stream with the replacements of its field applied (`data: ...`, `event: ...`); other lines as they are. */
export function replaceSseLine(line: string, replacements: readonly { field: string; from: string; to: string }[]): string {
  const colon = line.indexOf(':');
  if (colon <= 0) return line;
  const field = line.slice(0, colon);
  let value = line.slice(colon + 1);
  const space = value.startsWith(' ') ? ' ' : '';
  value = value.slice(space.length);
  for (const r of replacements) {
    if (r.field !== field) continue;
    let p = patterns.get(r.from);
    if (!p) {
      p = new Re2Pattern(r.from);
      if (patterns.size > 256) patterns.clear();
      patterns.set(r.from, p);
    }
    value = replaceMatches(p, value, r.to).text;
  }
  return `${field}:${space}${value}`;
}

/** A whole event-stream body with replaceSseLine applied to each line (policy test). */
export const replaceSse = (body: string, replacements: readonly { field: string; from: string; to: string }[]) => body.split('\n').map((l) => replaceSseLine(l, replacements)).join('\n');

export const sseFindReplace: RunnerFactory = (config: A.SseFindReplaceAction): Runner => (ctx) => {
  (ctx.mutations.response.sse_replace ??= []).push(...config.replacements.map((r) => ({ field: r.field, from: expand(ctx, typeof r.from === 'string' ? r.from : r.from.source), to: expand(ctx, r.to) })));
  return { did: `sse-find-replace: ${config.replacements.length} replacement${config.replacements.length === 1 ? '' : 's'} for event-stream messages` };
};

/** The client's preferred encoding among `allowed` (q-values; br, then gzip, then deflate on a tie). */
export function chooseAmong(accept: string, allowed: readonly string[]): string | undefined {
  const q: Record<string, number> = {};
  for (const part of accept.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (name) q[name] = qp ? Number(qp.slice(2)) || 0 : 1;
  }
  let best: string | undefined;
  let bestQ = 0;
  for (const a of ['br', 'gzip', 'deflate'].filter((x) => allowed.includes(x))) {
    // zstd: not in Node.js 20's zlib, so never chosen here (docs/traffic-policy.md).
    const v = q[a] ?? q['*'] ?? 0;
    if (v > bestQ) {
      best = a;
      bestQ = v;
    }
  }
  return best;
}

export const compressResponse: RunnerFactory = (config: A.CompressResponseAction): Runner => (ctx) => {
  const accept = headerOf(ctx.vars.req!, 'accept-encoding')?.join(',') ?? '';
  const encoding = chooseAmong(accept, config.algorithms);
  const already = (ctx.vars.res!.headers['content-encoding'] ?? []).some((e) => e.toLowerCase() !== 'identity');
  const out = actionOutput(ctx.vars, 'compress_response');
  if (!encoding || already) {
    out.algorithm = '';
    return { did: `compress-response: ${already ? 'already encoded' : `the client accepts none of ${config.algorithms.join(', ')}`}; unchanged` };
  }
  ctx.mutations.response.compress = encoding;
  out.algorithm = encoding;
  return { did: `compress-response: ${encoding}` };
};

export const circuitBreaker: RunnerFactory = (config: A.CircuitBreakerAction, make): Runner => {
  const key = `${make.scope}\u0000${JSON.stringify(config)}`;
  return (ctx) => {
    const breaker = ctx.state.breaker(key, { trippedDurationMs: config.tripped_ms, rollingWindowMs: config.window_ms, numBuckets: config.num_buckets, volumeThreshold: config.volume_threshold, errorThreshold: config.error_threshold });
    const out = actionOutput(ctx.vars, 'circuit_breaker');
    if (breaker.allow(ctx.now)) {
      out.tripped = false;
      (ctx.mutations.request.circuit_breakers ??= []).push(breaker);
      return { did: `circuit-breaker: ${breaker.state}; lets the request through` };
    }
    out.tripped = true;
    if (!config.enforce) return { did: 'circuit-breaker: tripped; lets the request through (enforce: false)' };
    const wait = breaker.retryAfter(ctx.now);
    return { ended: respond(503, 'Service Unavailable: the upstream failed too often\n', { 'retry-after': String(wait) }), did: `circuit-breaker: tripped; 503, retry-after ${wait}s` };
  };
};

/** The most of an http-request's answer kept (its body is readable in later expressions). */
export const HTTP_REQUEST_MAX_ANSWER = 1024 * 1024;

export const httpRequest: RunnerFactory = (config: A.HttpRequestAction): Runner => (ctx) => {
  const url = new URL(expand(ctx, config.url));
  for (const [k, v] of config.query_params) url.searchParams.append(k, expand(ctx, v));
  const init: RequestInit = { method: config.method, headers: expandAll(ctx, config.headers), redirect: config.max_redirects > 0 ? 'follow' : 'manual', signal: AbortSignal.timeout(config.timeout_ms) };
  if (config.body && config.method !== 'GET' && config.method !== 'HEAD') init.body = expand(ctx, config.body);
  const started = Date.now();
  const pending = (async (): Promise<Omit<ActionRun, 'pending'>> => {
    const out = actionOutput(ctx.vars, 'http_request');
    try {
      const res = await fetch(url, init);
      const reader = res.body?.getReader();
      const chunks: Uint8Array[] = [];
      let size = 0;
      while (reader) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.length;
        if (size > HTTP_REQUEST_MAX_ANSWER) {
          await reader.cancel();
          throw new Error(`the answer is over ${HTTP_REQUEST_MAX_ANSWER} bytes`);
        }
        chunks.push(value);
      }
      const headers: Record<string, string[]> = {};
      res.headers.forEach((v, k) => (headers[k] = [v]));
      out.res = { status_code: BigInt(res.status), headers, body: Buffer.concat(chunks).toString('utf8'), url: res.url, duration: BigInt(Date.now() - started) };
      out.error = { code: '', message: '' };
      return { did: `http-request: ${config.method} ${url.origin}${url.pathname}: ${res.status}` };
    } catch (e) {
      const message = (e as Error).name === 'TimeoutError' ? `no answer within ${config.timeout_ms} ms` : (e as Error).message;
      out.error = { code: 'ERR_NGROK_20019', message };
      if (config.on_error === 'continue') return { did: `http-request: ${message}; continues (on_error: continue)` };
      return { ended: respond(502, 'Bad Gateway: a request the policy makes failed\n'), did: `http-request: ${message}; 502 (on_error: halt)` };
    }
  })();
  return { did: 'http-request: sent', pending };
};

/**
 * forward-internal: asks the server to send the request to an internal endpoint instead of the
 * route's backend. The engine only records it; the endpoints code resolves the URL
 * (setForwardInternal) and the ingress acts on `mutations.request.forward_internal`. Without
 * a resolver, a forward to an endpoint that does not exist follows on_error.
 */
export type ForwardInternalResolver = (url: string, binding: string | undefined, state: RunContext['state'], onError: 'halt' | 'continue') => boolean;
let resolver: ForwardInternalResolver | undefined;
export function setForwardInternal(r: ForwardInternalResolver | undefined): void {
  resolver = r;
}

export const forwardInternal: RunnerFactory = (config: A.ForwardInternalAction): Runner => (ctx) => {
  const url = expand(ctx, config.url);
  const known = resolver ? resolver(url, config.binding, ctx.state, config.on_error) : true;
  if (!known) {
    if (config.on_error === 'continue') return { did: `forward-internal: no internal endpoint ${url}; continues (on_error: continue)` };
    return { ended: respond(404, `No internal endpoint ${url}\n`), did: `forward-internal: no internal endpoint ${url}; 404` };
  }
  const target = { url, ...(config.binding ? { binding: config.binding } : {}), on_error: config.on_error };
  ctx.mutations.request.forward_internal = target;
  return { ended: { forward_internal: target }, did: `forward-internal: to ${url}` };
};
