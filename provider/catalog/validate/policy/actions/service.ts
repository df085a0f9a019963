// The actions of the service's traffic-policy language beyond SPEC's first eight: each with
// its configuration as the service documents it (names, defaults, phases). Their runners are
// in server/policy/actions/. Fields hold `${expr}` interpolations where they are strings
// (traffic-policy.ts compiles them); a regex field with one is compiled when it runs.
import { parseDuration } from '../../traffic-policy.js';
import { WEBHOOK_PROVIDERS } from '../../../webhook-providers.js';
import { Re2Pattern, regexProblem } from '../../regex.js';
import { at, headerMap, onlyFields, problem, text, type ConfigContext } from '../config.js';
import { hasInterpolation } from '../template.js';
import { ALL_PHASES, defineAction, HTTP_PHASES } from './define.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function bool(c: ConfigContext, key: string, fallback: boolean): boolean | undefined {
  const v = c.config[key];
  if (v === undefined) return fallback;
  return typeof v === 'boolean' ? v : problem(c, key, `${key} must be true or false`);
}

/** A duration field (`10s`, `1m`) in milliseconds. */
function duration(c: ConfigContext, key: string, fallbackMs: number, range: [number, number]): number | undefined {
  const v = c.config[key];
  if (v === undefined) return fallbackMs;
  const s = typeof v === 'string' ? parseDuration(v) : undefined;
  if (s === undefined) return problem(c, key, `${key} ${JSON.stringify(v)} must be a duration such as "10s" or "1m"`);
  const ms = s * 1000;
  if (ms < range[0] || ms > range[1]) return problem(c, key, `${key} must be from ${range[0] / 1000}s to ${range[1] / 1000}s`);
  return ms;
}

function integer(c: ConfigContext, key: string, fallback: number, min: number, max: number): number | undefined {
  const v = c.config[key];
  if (v === undefined) return fallback;
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : problem(c, key, `${key} must be an integer from ${min} to ${max}`);
}

/** A regex field: compiled now, or kept as text when it holds an interpolation (compiled when it runs). */
export function regexField(c: ConfigContext, key: string | number, source: string): Re2Pattern | string | undefined {
  if (hasInterpolation(source)) return source;
  const why = regexProblem(source);
  if (!why) {
    try {
      return new Re2Pattern(source);
    } catch (e) {
      return problem(c, key, `${key} is not a valid RE2 pattern: ${(e as Error).message}`);
    }
  }
  return problem(c, key, `${key} is not a valid RE2 pattern: ${why}`);
}

// ---- log, set-vars, close-connection -------------------------------------------------------

export interface LogAction { metadata: Record<string, unknown> }
export const log = defineAction<LogAction>({
  type: 'log',
  phases: ALL_PHASES,
  fields: ['metadata'],
  check(c) {
    onlyFields(c, this.fields);
    const m = c.config.metadata ?? {};
    if (!isObject(m)) return problem(c, 'metadata', 'metadata must be a map of names to values');
    return { metadata: m };
  },
});

export interface SetVarsAction { vars: [string, unknown][] }
export const setVars = defineAction<SetVarsAction>({
  type: 'set-vars',
  phases: ALL_PHASES,
  fields: ['vars'],
  check(c) {
    onlyFields(c, this.fields);
    const v = c.config.vars;
    // The service's form is a list of one-entry maps (kept in order); a plain map is taken too.
    const entries: [string, unknown][] = [];
    if (Array.isArray(v)) {
      v.forEach((e, i) => {
        if (!isObject(e) || Object.keys(e).length !== 1) problem(c, `vars[${i}]`, 'each entry of vars is a map of one name to its value');
        else entries.push(Object.entries(e)[0]);
      });
    } else if (isObject(v)) entries.push(...Object.entries(v));
    else return problem(c, 'vars', 'vars is required: a list of {name: value} entries');
    for (const [name] of entries) if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) problem(c, 'vars', `"${name}" is not a variable name (letters, digits and _, not first a digit)`);
    return { vars: entries };
  },
});

export const closeConnection = defineAction<Record<string, never>>({
  type: 'close-connection',
  phases: ALL_PHASES,
  fields: [],
  check(c) {
    onlyFields(c, this.fields);
    return {};
  },
});

// ---- basic-auth, jwt-validation, verify-webhook -------------------------------------------

export interface BasicAuthAction { credentials: { username: string; password: string }[]; realm: string; enforce: boolean }
export const basicAuth = defineAction<BasicAuthAction>({
  type: 'basic-auth',
  phases: ['on_http_request'],
  fields: ['credentials', 'realm', 'enforce'],
  check(c) {
    onlyFields(c, this.fields);
    const list = c.config.credentials;
    const credentials: BasicAuthAction['credentials'] = [];
    if (!Array.isArray(list) || list.length === 0 || list.length > 10) return problem(c, 'credentials', 'credentials is required: a list of 1 to 10 "username:password" strings');
    list.forEach((e, i) => {
      // "username:password", or {username, password} as some of the service's examples write it.
      if (isObject(e) && typeof e.username === 'string' && typeof e.password === 'string' && e.username && e.password && !e.username.includes(':')) return void credentials.push({ username: e.username, password: e.password });
      const colon = typeof e === 'string' ? e.indexOf(':') : -1;
      if (colon <= 0 || colon === (e as string).length - 1) problem(c, `credentials[${i}]`, 'a credential is "username:password" (or {username, password}), both non-empty');
      else credentials.push({ username: (e as string).slice(0, colon), password: (e as string).slice(colon + 1) });
    });
    const realm = text(c, 'realm', { max: 128 }) ?? 'ngrok';
    const enforce = bool(c, 'enforce', true);
    return enforce === undefined || credentials.length !== list.length ? undefined : { credentials, realm, enforce };
  },
});

export interface JwtToken { type: string; method: 'header' | 'cookie' | 'query' | 'body'; name: string; prefix: string }
export interface JwtValidationAction {
  issuers: string[];
  audiences: string[];
  tokens: JwtToken[];
  algorithms: string[];
  jkus: string[];
  /** Keys given inline (JWK objects), beside or instead of fetched key sets. */
  keys: Record<string, unknown>[];
  enforce: boolean;
}
const JWS_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'HS256', 'HS384', 'HS512'];
export const jwtValidation = defineAction<JwtValidationAction>({
  type: 'jwt-validation',
  phases: ['on_http_request'],
  fields: ['issuer', 'audience', 'http', 'jws', 'enforce'],
  check(c) {
    onlyFields(c, this.fields);
    const allowList = (key: 'issuer' | 'audience') => {
      const v = c.config[key];
      const list = isObject(v) ? v.allow_list : undefined;
      if (!Array.isArray(list) || list.length === 0) return problem(c, key, `${key}.allow_list is required: a list of {value: ...}`);
      const out = list.map((e) => (isObject(e) && typeof e.value === 'string' ? e.value : undefined));
      if (out.some((x) => x === undefined)) return problem(c, `${key}.allow_list`, 'each entry is {value: "<string>"}');
      return out as string[];
    };
    const issuers = allowList('issuer');
    const audiences = allowList('audience');
    const http = c.config.http;
    const tokens: JwtToken[] = [];
    const list = isObject(http) ? http.tokens : undefined;
    if (!Array.isArray(list) || list.length === 0) problem(c, 'http', 'http.tokens is required: where the token is, e.g. {type: jwt, method: header, name: Authorization, prefix: "Bearer "}');
    else
      list.forEach((t, i) => {
        const ok = isObject(t) && ['jwt', 'access_token', 'id_token', 'it+jwt'].includes(String(t.type ?? 'jwt')) && ['header', 'cookie', 'query', 'body'].includes(String(t.method ?? 'header')) && typeof t.name === 'string' && t.name !== '';
        if (!ok) problem(c, `http.tokens[${i}]`, 'a token is {type: jwt|access_token|id_token|it+jwt, method: header|cookie|query|body, name: <name>, prefix: <optional prefix>}');
        else tokens.push({ type: String(t.type ?? 'jwt'), method: (t.method ?? 'header') as JwtToken['method'], name: t.name as string, prefix: typeof t.prefix === 'string' ? t.prefix : '' });
      });
    const jws = isObject(c.config.jws) ? c.config.jws : {};
    const algorithms = Array.isArray(jws.allowed_algorithms) ? (jws.allowed_algorithms as unknown[]) : [];
    if (!algorithms.length || algorithms.some((a) => !JWS_ALGORITHMS.includes(a as string))) problem(c, 'jws.allowed_algorithms', `jws.allowed_algorithms is required: a list of ${JWS_ALGORITHMS.join(', ')}`);
    const jkus: string[] = [];
    const keys: Record<string, unknown>[] = [];
    const sources = Array.isArray(jws.keys) ? jws.keys : isObject(jws.keys) ? [jws.keys] : [];
    for (const k of sources) {
      const s = isObject(k) ? k.sources : undefined;
      for (const src of Array.isArray(s) ? s : isObject(s) ? [s] : []) {
        if (isObject(src) && Array.isArray(src.additional_jkus)) jkus.push(...src.additional_jkus.filter((u): u is string => typeof u === 'string'));
        if (isObject(src) && Array.isArray(src.keys)) keys.push(...src.keys.filter(isObject));
      }
    }
    if (!jkus.length && !keys.length) problem(c, 'jws.keys', 'jws.keys needs sources: additional_jkus (URLs of JSON Web Key Sets) or keys (JWKs inline)');
    for (const u of jkus) if (!/^https?:\/\//.test(u)) problem(c, 'jws.keys', `the JWKS URL ${JSON.stringify(u)} must be http(s)`);
    const enforce = bool(c, 'enforce', true);
    if (!issuers || !audiences || enforce === undefined || !tokens.length || c.issues.some((i) => i.path.startsWith(c.path))) return undefined;
    return { issuers, audiences, tokens, algorithms: algorithms as string[], jkus, keys, enforce };
  },
});

export interface VerifyWebhookAction { provider: string; secret: string; enforce: boolean }
export const verifyWebhook = defineAction<VerifyWebhookAction>({
  type: 'verify-webhook',
  phases: ['on_http_request'],
  fields: ['provider', 'secret', 'enforce'],
  check(c) {
    onlyFields(c, this.fields);
    const provider = text(c, 'provider', { required: true })?.toLowerCase();
    if (provider !== undefined && !(WEBHOOK_PROVIDERS as readonly string[]).includes(provider)) return problem(c, 'provider', `unknown webhook provider "${provider}"; providers: ${WEBHOOK_PROVIDERS.join(', ')}`);
    const secret = text(c, 'secret', { required: true, max: 4096 });
    const enforce = bool(c, 'enforce', true);
    return provider === undefined || secret === undefined || enforce === undefined ? undefined : { provider, secret, enforce };
  },
});

// ---- bodies, compression, circuit breaker, side requests, forward-internal -----------------

export interface Replacement { from: Re2Pattern | string; to: string }
export interface FindReplaceAction { replacements: Replacement[] }

function replacements(c: ConfigContext): Replacement[] | undefined {
  const list = c.config.replacements;
  if (!Array.isArray(list) || list.length === 0) return problem(c, 'replacements', 'replacements is required: a list of {from: <RE2 pattern>, to: <text>}');
  const out: Replacement[] = [];
  list.forEach((r, i) => {
    if (!isObject(r) || typeof r.from !== 'string' || r.from === '' || (r.to !== undefined && typeof r.to !== 'string')) return void problem(c, `replacements[${i}]`, 'a replacement is {from: <RE2 pattern>, to: <text>}');
    const from = regexField(c, `replacements[${i}].from`, r.from);
    if (from !== undefined) out.push({ from, to: (r.to as string | undefined) ?? '' });
  });
  return out.length === list.length ? out : undefined;
}

const findReplace = (type: string, phase: 'on_http_request' | 'on_http_response') =>
  defineAction<FindReplaceAction>({
    type,
    phases: [phase],
    fields: ['replacements'],
    check(c) {
      onlyFields(c, this.fields);
      const r = replacements(c);
      return r && { replacements: r };
    },
  });
export const requestBodyFindReplace = findReplace('request-body-find-replace', 'on_http_request');
export const responseBodyFindReplace = findReplace('response-body-find-replace', 'on_http_response');

export interface SseFindReplaceAction { replacements: (Replacement & { field: string })[] }
export const sseFindReplace = defineAction<SseFindReplaceAction>({
  type: 'sse-find-replace',
  phases: ['on_http_response'],
  fields: ['replacements'],
  check(c) {
    onlyFields(c, this.fields);
    const r = replacements(c);
    if (!r) return undefined;
    const list = c.config.replacements as Record<string, unknown>[];
    return { replacements: r.map((x, i) => ({ ...x, field: typeof list[i].field === 'string' ? (list[i].field as string) : 'data' })) };
  },
});

/** zstd and compress are taken (the service lists them) but never chosen here (Node.js 20 has neither): the client gets its next choice among gzip, br and deflate. */
export const COMPRESSION_ALGORITHMS = ['gzip', 'br', 'deflate', 'zstd', 'compress'] as const;
export interface CompressResponseAction { algorithms: string[] }
export const compressResponse = defineAction<CompressResponseAction>({
  type: 'compress-response',
  phases: ['on_http_response'],
  fields: ['algorithms'],
  check(c) {
    onlyFields(c, this.fields);
    const v = c.config.algorithms ?? ['gzip', 'br', 'deflate'];
    if (!Array.isArray(v) || v.length === 0 || v.some((a) => !(COMPRESSION_ALGORITHMS as readonly string[]).includes(a as string)))
      return problem(c, 'algorithms', `algorithms must be a list of ${COMPRESSION_ALGORITHMS.join(', ')}`);
    return { algorithms: v as string[] };
  },
});

export interface CircuitBreakerAction { error_threshold: number; volume_threshold: number; window_ms: number; tripped_ms: number; num_buckets: number; enforce: boolean }
export const circuitBreakerAction = defineAction<CircuitBreakerAction>({
  type: 'circuit-breaker',
  phases: ['on_http_request'],
  fields: ['error_threshold', 'volume_threshold', 'window_duration', 'tripped_duration', 'num_buckets', 'enforce'],
  check(c) {
    onlyFields(c, this.fields);
    const t = c.config.error_threshold ?? 0.5;
    const error_threshold = typeof t === 'number' && t >= 0 && t <= 1 ? t : problem(c, 'error_threshold', 'error_threshold must be a number from 0 to 1 (the share of errors that trips the breaker)');
    const volume_threshold = integer(c, 'volume_threshold', 10, 1, 1_000_000);
    const window_ms = duration(c, 'window_duration', 10_000, [1000, 3_600_000]);
    const tripped_ms = duration(c, 'tripped_duration', 10_000, [1000, 3_600_000]);
    const num_buckets = integer(c, 'num_buckets', 10, 1, 128);
    const enforce = bool(c, 'enforce', true);
    if ([error_threshold, volume_threshold, window_ms, tripped_ms, num_buckets, enforce].includes(undefined)) return undefined;
    return { error_threshold: error_threshold!, volume_threshold: volume_threshold!, window_ms: window_ms!, tripped_ms: tripped_ms!, num_buckets: num_buckets!, enforce: enforce! };
  },
});

export interface HttpRequestAction { url: string; method: string; headers: Record<string, string>; body: string; query_params: [string, string][]; timeout_ms: number; max_redirects: number; on_error: 'halt' | 'continue' }
export const HTTP_REQUEST_MAX_BODY = 1024 * 1024;
export const httpRequest = defineAction<HttpRequestAction>({
  type: 'http-request',
  phases: HTTP_PHASES,
  fields: ['url', 'method', 'query_params', 'headers', 'body', 'max_redirects', 'timeout', 'retry_condition', 'on_error'],
  check(c) {
    onlyFields(c, this.fields);
    const url = text(c, 'url', { required: true, max: 2048 });
    if (url !== undefined && !hasInterpolation(url) && !/^https?:\/\//.test(url)) problem(c, 'url', 'url must be an http(s) URL');
    const method = (text(c, 'method') ?? 'GET').toUpperCase();
    if (!['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'].includes(method)) problem(c, 'method', 'method must be GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS');
    const headers = headerMap(c, 'headers', false);
    const body = text(c, 'body', { max: HTTP_REQUEST_MAX_BODY }) ?? '';
    const q = c.config.query_params ?? [];
    const query_params: [string, string][] = [];
    if (!Array.isArray(q)) problem(c, 'query_params', 'query_params must be a list of {name: value}');
    else for (const e of q) if (isObject(e)) for (const [k, v] of Object.entries(e)) query_params.push([k, String(v)]);
    const timeout_ms = duration(c, 'timeout', 10_000, [1, 30_000]);
    const max_redirects = integer(c, 'max_redirects', 0, 0, 10);
    if (c.config.retry_condition !== undefined) problem(c, 'retry_condition', 'retry_condition is not supported here (a request is made once); remove it');
    const on_error = (c.config.on_error ?? 'halt') as string;
    if (on_error !== 'halt' && on_error !== 'continue') problem(c, 'on_error', 'on_error must be halt or continue');
    if (url === undefined || headers === undefined || timeout_ms === undefined || max_redirects === undefined || c.issues.some((i) => i.path.startsWith(c.path))) return undefined;
    return { url, method, headers, body, query_params, timeout_ms, max_redirects, on_error: on_error as 'halt' | 'continue' };
  },
});

export interface ForwardInternalAction { url: string; binding?: string; on_error: 'halt' | 'continue' }
export const forwardInternal = defineAction<ForwardInternalAction>({
  type: 'forward-internal',
  // on_tcp_connect: a TCP or TLS cloud endpoint hands the connection on (server/ingress/cloud-endpoints.ts).
  phases: ['on_http_request', 'on_tcp_connect'],
  fields: ['url', 'binding', 'on_error'],
  check(c) {
    onlyFields(c, this.fields);
    const url = text(c, 'url', { required: true, max: 2048 });
    if (url !== undefined && !hasInterpolation(url) && !/^(https?|tcp|tls):\/\/[^/]*\.internal(:\d+)?(\/|$)|^(https?|tcp|tls):\/\/[^/]*\.internal$/.test(url))
      problem(c, 'url', `url ${JSON.stringify(url)} must name an internal endpoint (a host ending in .internal, such as https://api.internal)`);
    const binding = text(c, 'binding');
    const on_error = (c.config.on_error ?? 'halt') as string;
    if (on_error !== 'halt' && on_error !== 'continue') problem(c, 'on_error', 'on_error must be halt or continue');
    if (url === undefined || c.issues.some((i) => i.path.startsWith(c.path))) return undefined;
    return { url, ...(binding ? { binding } : {}), on_error: on_error as 'halt' | 'continue' };
  },
});

// ---- refused: what this engine cannot honour, said when the policy is compiled ------------

const refused = (type: string, phases: typeof ALL_PHASES | typeof HTTP_PHASES | readonly ['on_http_request'] | readonly ['on_http_response'], why: string) =>
  defineAction<never>({
    type,
    phases,
    fields: [],
    check(c) {
      c.issues.push({ path: at(c.path.replace(/\.config$/, ''), 'type'), message: `${type} is not supported by edgeform's policy engine: ${why}` });
      return undefined;
    },
  });

export const owaspRequest = refused('owasp-crs-request', ['on_http_request'], 'no maintained OWASP Core Rule Set engine runs in-process in Node.js; put a WAF (ModSecurity, Coraza) in front of the upstream');
export const owaspResponse = refused('owasp-crs-response', ['on_http_response'], 'no maintained OWASP Core Rule Set engine runs in-process in Node.js; put a WAF (ModSecurity, Coraza) in front of the upstream');
export const oauthAction = refused('oauth', ['on_http_request'], "not yet in the service's form; use the route's oauth module (docs/routes.md), or its action module-oauth, which run the same login flow");
export const openidConnect = refused('openid-connect', ['on_http_request'], "not yet in the service's form; use the route's oidc module (docs/routes.md), or its action module-oidc");
export const samlAction = refused('saml', ['on_http_request'], "not yet in the service's form; use the route's saml module (docs/routes.md), or its action module-saml");
export const terminateTls = refused('terminate-tls', ALL_PHASES, "TLS is terminated by the edge's listener and its certificate settings (a TLS edge's tls_termination module), not by a policy");
