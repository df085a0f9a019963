// What an evaluation is given (plain data, as the ingress or `policy test` has it) and the
// CEL variables made from it (the names and types of provider/catalog/validate/policy/variables.ts).
import { X509Certificate } from 'node:crypto';
import { NAMESPACES } from '../../provider/catalog/validate/policy/functions.js';
import { zeroActionVars } from '../../provider/catalog/validate/policy/variables.js';
import { certificateVars, contentType, parseCookieHeader, parseSetCookies, parseUserAgent, type CertificateVars } from './parse.js';

/** Header values by name; names in any case, a value or a list of values. */
export type HeaderInput = Record<string, string | readonly string[]>;

export interface TlsInput {
  /** `1.2`, `1.3`. */
  version?: string;
  cipher_suite?: string;
  sni?: string;
  negotiated_alpn?: string;
  session_resumed?: boolean;
  /** The client's certificate when it sent one (mutual TLS): PEM, DER or a node:crypto X509Certificate. */
  client_certificate?: string | Buffer | X509Certificate;
  /** The certificate the edge presented. */
  server_certificate?: string | Buffer | X509Certificate;
}

export interface ConnectionInput {
  client_ip: string;
  server_port: number;
  client_port?: number;
  server_ip?: string;
  /** The TLS version (`1.2`, `1.3`) when the connection has TLS (the earlier spelling of tls.version). */
  tls_version?: string;
  tls?: TlsInput;
  /** When the connection started, in ms since the epoch (the evaluation's time when absent). */
  started_at?: number;
  bytes_in?: number;
  bytes_out?: number;
}

export interface RequestInput {
  method: string;
  /** The whole URL as the client asked for it: `https://app.example.com/api?x=1`. */
  url: string;
  headers: HeaderInput;
  content_length?: number;
  /** The request body when the caller has it (`policy test --body`; the ingress when an action needs it). */
  body?: string | Buffer;
  trailers?: HeaderInput;
  /** `1.1`, `2`. */
  version?: string;
  /** When the head and the body arrived, in ms since the epoch. */
  header_received_at?: number;
  body_received_at?: number;
}

export interface ResponseInput {
  status_code: number;
  headers: HeaderInput;
  /** The upstream's body when the caller has it (`policy test --upstream-body`; the ingress when an action needs it). */
  body?: string | Buffer;
  trailers?: HeaderInput;
}

/** The endpoint (route or edge) the request came in on; derived from the request when absent. */
export interface EndpointInput { id?: string; url?: string; host?: string; port?: number; protocol?: string }

export interface PolicyInput {
  /** The time of the request in milliseconds since the epoch (Date.now() when absent). */
  now?: number;
  conn: ConnectionInput;
  req?: RequestInput;
  res?: ResponseInput;
  endpoint?: EndpointInput;
  /** set-vars' variables an earlier phase of the same request left. */
  vars?: Record<string, unknown>;
  /** The action variables an earlier phase of the same request left (on_http_response reads on_http_request's). */
  actions?: ActionVariables;
}

export type ActionVariables = ReturnType<typeof zeroActionVars>;

/** Header names in lower case, each with its list of values. */
export function headerLists(headers: HeaderInput): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const key = name.toLowerCase();
    (out[key] ??= []).push(...(typeof value === 'string' ? [value] : value));
  }
  return out;
}

function queryLists(params: URLSearchParams): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of params) (out[k] ??= []).push(v);
  return out;
}

/** The request variables (variables.ts); `url$` is req.url read whole, as a string. */
export interface RequestVars {
  method: string;
  url$: string;
  url: UrlVars;
  path: string;
  host: string;
  query: Record<string, string[]>;
  query_params: Record<string, string[]>;
  headers: Record<string, string[]>;
  content_length: bigint;
  [name: string]: unknown;
}

export interface UrlVars { authority: string; host: string; path: string; port: bigint; query: string; query_params: Record<string, string[]>; raw: string; raw_path: string; scheme: string; uri: string; user_password: string }

const NO_QUERY: Record<string, string[]> = Object.freeze({}) as Record<string, string[]>;

interface SplitUrl { host: string; path: string; query: string }

/**
 * Host, path and query of an absolute http(s) URL, by position rather than with new URL()
 * (a third of an evaluation's time); anything unusual (userinfo, no path) goes through URL.
 */
function splitUrl(url: string): SplitUrl {
  const scheme = url.indexOf('://');
  const pathAt = scheme < 0 ? -1 : url.indexOf('/', scheme + 3);
  if (pathAt < 0 || !plainAuthority(url, scheme + 3, pathAt)) {
    const u = new URL(url);
    return { host: u.hostname, path: u.pathname, query: u.search.slice(1) };
  }
  let end = pathAt;
  while (end < url.length && url.charCodeAt(end) !== 63 /* ? */ && url.charCodeAt(end) !== 35 /* # */) end++;
  let query = '';
  if (url.charCodeAt(end) === 63) {
    const hash = url.indexOf('#', end + 1);
    query = url.slice(end + 1, hash < 0 ? undefined : hash);
  }
  const authority = url.slice(scheme + 3, pathAt);
  const colon = authority.indexOf(':');
  return { host: colon < 0 ? authority : authority.slice(0, colon), path: url.slice(pathAt, end), query };
}

/** Whether url[from, to) is a host and port as new URL() would give them back: no userinfo, IPv6 brackets, upper case, escapes, or a query or fragment before the path. */
function plainAuthority(url: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = url.charCodeAt(i);
    if (c === 64 /* @ */ || c === 91 /* [ */ || c === 37 /* % */ || c === 63 /* ? */ || c === 35 /* # */ || (c >= 65 && c <= 90) /* A-Z */) return false;
  }
  return true;
}

/*
 * The variables are made lazily: each on its first read, by an expression or an action, and
 * kept for the rest of the evaluation. A rule such as `req.path.startsWith('/api')` with a
 * rate-limit keyed by one header reads three of them; building all of them (every header
 * name lower-cased into lists, the query parsed, a Date, the action variables) was most of
 * an evaluation's time. The objects are plain (their prototype's constructor is Object), as
 * the CEL library requires of a map or message value, with getters on a shared prototype.
 */

/** Header names with more than this many entries are lower-cased into lists once, rather than searched per lookup. */
const SCAN_HEADERS = 8;

/** The values of one header (name in lower case) in input headers of names in any case, or undefined. */
function scanHeader(headers: HeaderInput, name: string): string[] | undefined {
  let out: string[] | undefined;
  for (const key in headers) {
    if (key.length !== name.length || (key !== name && key.toLowerCase() !== name)) continue;
    const value = headers[key];
    if (typeof value === 'string') (out ??= []).push(value);
    else (out ??= []).push(...value);
  }
  return out;
}

interface LazyRequest extends RequestVars {
  input: RequestInput;
  _method?: string;
  _url?: string;
  _split?: SplitUrl;
  _query?: Record<string, string[]>;
  _headers?: Record<string, string[]>;
  _length?: bigint;
  _urlVars?: UrlVars;
  _cookies?: Record<string, { name: string; value: string }[]>;
  _ua?: ReturnType<typeof parseUserAgent>;
  _ct?: ReturnType<typeof contentType>;
}

const split = (r: LazyRequest) => (r._split ??= splitUrl(r._url ?? r.input.url));
const first = (r: LazyRequest, name: string) => headerOf(r, name)?.[0] ?? '';
const EMPTY_LISTS: Record<string, string[]> = Object.freeze({}) as Record<string, string[]>;
const at = (ms: number | undefined) => (ms === undefined ? new Date(0) : new Date(ms));

/**
 * req.url's fields, each made when read: path, host and query by position (splitUrl), the
 * rest from one new URL() made only when one of them is read.
 */
interface LazyUrl { r: LazyRequest; _parsed?: URL }
const parsedUrl = (u: LazyUrl) => (u._parsed ??= new URL(u.r._url ?? u.r.input.url));

const URL_PROTO: ThisType<LazyUrl> & Partial<UrlVars> = {
  get authority() {
    return parsedUrl(this).host;
  },
  get host() {
    return split(this.r).host.replace(/^\[|\]$/g, '');
  },
  get path() {
    return split(this.r).path;
  },
  get port() {
    return BigInt(parsedUrl(this).port || 0);
  },
  get query() {
    return split(this.r).query;
  },
  get query_params() {
    return this.r.query;
  },
  get raw() {
    return this.r.input.url;
  },
  get raw_path() {
    return /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*([^?#]*)/i.exec(this.r.input.url)?.[1] || '/';
  },
  get scheme() {
    const url = this.r._url ?? this.r.input.url;
    return url.slice(0, Math.max(0, url.indexOf(':'))).toLowerCase();
  },
  get uri() {
    const u = parsedUrl(this);
    return u.pathname + u.search;
  },
  get user_password() {
    const u = parsedUrl(this);
    return u.username ? (u.password ? `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}` : decodeURIComponent(u.username)) : '';
  },
};

/** req.url's fields, each made when read: path, host and query by position (splitUrl), the rest from one new URL() made only when one of them is read. */
function urlVars(r: LazyRequest): UrlVars {
  const u = Object.create(URL_PROTO) as LazyUrl & UrlVars;
  u.r = r;
  return u;
}

const REQUEST_PROTO: ThisType<LazyRequest> & Partial<RequestVars> = {
  get method() {
    return (this._method ??= this.input.method.toUpperCase());
  },
  get url$() {
    return this._url ?? this.input.url;
  },
  get url() {
    return (this._urlVars ??= urlVars(this));
  },
  get path() {
    return split(this).path;
  },
  get host() {
    return split(this).host;
  },
  get query() {
    if (this._query) return this._query;
    const q = split(this).query;
    return (this._query = q ? queryLists(new URLSearchParams(q)) : NO_QUERY);
  },
  get query_params() {
    return this.query;
  },
  get headers() {
    return (this._headers ??= headerLists(this.input.headers));
  },
  get trailers() {
    return this.input.trailers ? headerLists(this.input.trailers) : EMPTY_LISTS;
  },
  get content_length() {
    if (this._length !== undefined) return this._length;
    const body = this.input.body;
    const length = this.input.content_length ?? (body !== undefined ? Buffer.byteLength(body) : Number(headerOf(this, 'content-length')?.[0] ?? 0));
    return (this._length = BigInt(Number.isSafeInteger(length) && length >= 0 ? length : 0));
  },
  get body_length() {
    const body = this.input.body;
    return body === undefined ? this.content_length : BigInt(Buffer.byteLength(body));
  },
  get content_encoding() {
    return (headerOf(this, 'content-encoding') ?? []).flatMap((v) => v.split(',').map((x) => x.trim()).filter(Boolean));
  },
  get content_type$() {
    return (this._ct ??= contentType(first(this, 'content-type'))).type;
  },
  get content_type() {
    const ct = (this._ct ??= contentType(first(this, 'content-type')));
    return { parameters: ct.parameters, raw: ct.raw };
  },
  get cookies() {
    return (this._cookies ??= parseCookieHeader(headerOf(this, 'cookie') ?? []));
  },
  get location() {
    return first(this, 'location');
  },
  get user_agent$() {
    return first(this, 'user-agent');
  },
  get user_agent() {
    return (this._ua ??= userAgentOf(first(this, 'user-agent')));
  },
  get version() {
    return this.input.version ?? '1.1';
  },
  get ts() {
    return { header_received: at(this.input.header_received_at), body_received: at(this.input.body_received_at ?? this.input.header_received_at) };
  },
};

/** The request variables of `req`, each made when first read. */
export function requestVars(req: RequestInput): RequestVars {
  const r = Object.create(REQUEST_PROTO) as LazyRequest;
  r.input = req;
  return r;
}

/**
 * The values of header `name` (lower case) of request variables, without making the whole
 * `req.headers` map for a request of a few headers (a rate-limit key, `getReqHeader`).
 */
export function headerOf(req: RequestVars, name: string): string[] | undefined {
  const r = req as LazyRequest;
  if (r._headers) return r._headers[name];
  let count = 0;
  for (const _ in r.input.headers) if (++count > SCAN_HEADERS) return req.headers[name];
  return scanHeader(r.input.headers, name);
}

/** Points the request variables at a new URL (url-rewrite): url, path, host and query follow; throws when it is not a URL. */
export function rewriteUrl(req: RequestVars, url: string): void {
  const r = req as LazyRequest;
  const parts = splitUrl(url);
  r._url = url;
  r._split = parts;
  r._query = undefined;
  r._urlVars = undefined;
}

export interface ConnectionVars {
  client_ip: string;
  server_port: bigint;
  tls: { version: string; [name: string]: unknown };
  [name: string]: unknown;
}
export interface ResponseVars { status_code: bigint; headers: Record<string, string[]>; [name: string]: unknown }

const NO_CERT: CertificateVars = certificateVars(undefined);

/** Parsed user agents by their text: a site sees a few hundred distinct ones, and each parse is a dozen regexes. */
const agents = new Map<string, ReturnType<typeof parseUserAgent>>();
function userAgentOf(ua: string) {
  let parsed = agents.get(ua);
  if (!parsed) {
    if (agents.size >= 1000) agents.clear();
    agents.set(ua, (parsed = Object.freeze(parseUserAgent(ua))));
  }
  return parsed;
}

interface LazyConnection { input: ConnectionInput; now: number; _tls?: Record<string, unknown> }
interface LazyTls { input: TlsInput; _client?: CertificateVars; _server?: CertificateVars }

/* conn.* and conn.tls.* on shared prototypes of getters, as the request's: one small object per evaluation, each field made when read. */
const TLS_PROTO: ThisType<LazyTls> & Record<string, unknown> = {
  get cipher_suite() {
    return this.input.cipher_suite ?? '';
  },
  get sni() {
    return this.input.sni ?? '';
  },
  get negotiated_alpn() {
    return this.input.negotiated_alpn ?? '';
  },
  get session_resumed() {
    return this.input.session_resumed ?? false;
  },
  ja4_fingerprint: '',
  get client() {
    return (this._client ??= this.input.client_certificate ? certificateVars(this.input.client_certificate) : NO_CERT);
  },
  get server() {
    return (this._server ??= this.input.server_certificate ? certificateVars(this.input.server_certificate) : NO_CERT);
  },
};

const NO_TLS: TlsInput = Object.freeze({});

const CONNECTION_PROTO: ThisType<LazyConnection> & Record<string, unknown> = {
  get client_ip() {
    return this.input.client_ip;
  },
  get client_ip$() {
    return this.input.client_ip;
  },
  get client_port() {
    return BigInt(this.input.client_port ?? 0);
  },
  get server_ip() {
    return this.input.server_ip ?? '';
  },
  get server_port() {
    return BigInt(this.input.server_port);
  },
  server_region: '',
  get bytes_in() {
    return BigInt(this.input.bytes_in ?? 0);
  },
  get bytes_out() {
    return BigInt(this.input.bytes_out ?? 0);
  },
  get ts() {
    return { start: new Date(this.input.started_at ?? this.now) };
  },
  get tls() {
    if (this._tls) return this._tls;
    const t = Object.create(TLS_PROTO) as LazyTls & Record<string, unknown>;
    t.input = this.input.tls ?? NO_TLS;
    t.version = this.input.tls?.version ?? this.input.tls_version ?? '';
    return (this._tls = t);
  },
};

function connectionVars(c: ConnectionInput, now: number): ConnectionVars {
  const v = Object.create(CONNECTION_PROTO) as LazyConnection & ConnectionVars;
  v.input = c;
  v.now = now;
  return v;
}

function responseVars(res: ResponseInput): ResponseVars {
  const headers = headerLists(res.headers);
  const one = (name: string) => headers[name]?.[0] ?? '';
  let ct: ReturnType<typeof contentType> | undefined;
  let cookies: ReturnType<typeof parseSetCookies> | undefined;
  return {
    status_code: BigInt(res.status_code),
    headers,
    get trailers() {
      return res.trailers ? headerLists(res.trailers) : EMPTY_LISTS;
    },
    get content_length() {
      const n = res.body !== undefined ? Buffer.byteLength(res.body) : Number(one('content-length') || 0);
      return BigInt(Number.isSafeInteger(n) && n >= 0 ? n : 0);
    },
    get content_encoding() {
      return (headers['content-encoding'] ?? []).flatMap((v) => v.split(',').map((x) => x.trim()).filter(Boolean));
    },
    get content_type$() {
      return (ct ??= contentType(one('content-type'))).type;
    },
    get content_type() {
      ct ??= contentType(one('content-type'));
      return { parameters: ct.parameters, raw: ct.raw };
    },
    get cookies() {
      return (cookies ??= parseSetCookies(headers['set-cookie'] ?? []));
    },
    get location() {
      return one('location');
    },
  };
}

function endpointVars(input: PolicyInput): Record<string, unknown> {
  const e = input.endpoint ?? {};
  let scheme = e.protocol;
  let host = e.host;
  let port = e.port;
  if (input.req && (!scheme || !host || port === undefined)) {
    const u = new URL(input.req.url);
    scheme ??= u.protocol.replace(/:$/, '');
    host ??= u.hostname;
    port ??= Number(u.port || (scheme === 'https' ? 443 : 80));
  }
  scheme ??= input.conn.tls_version || input.conn.tls ? 'tls' : 'tcp';
  port ??= input.conn.server_port;
  host ??= '';
  const defaultPort = (scheme === 'https' && port === 443) || (scheme === 'http' && port === 80);
  const addr = host ? `${host}${defaultPort ? '' : `:${port}`}` : `:${port}`;
  return { id: e.id ?? '', url: e.url ?? `${scheme}://${addr}`, addr, host, port: BigInt(port), protocol: scheme, scheme };
}

/** The CEL variables of a phase; actions update `actions` and the header lists in place. */
export interface CelVariables {
  conn: ConnectionVars;
  endpoint: Record<string, unknown>;
  time: { now: Date };
  actions: ActionVariables;
  /** set-vars' variables (`vars.name`). */
  vars: Record<string, unknown>;
  req?: RequestVars;
  res?: ResponseVars;
}

interface LazyVariables extends CelVariables {
  input: PolicyInput;
  at: number;
  _conn?: ConnectionVars;
  _time?: { now: Date };
  _actions?: ActionVariables;
  /** The actions whose variables this evaluation has copied to write (see actionOutput). */
  _owned?: string[];
  _req?: RequestVars;
  _res?: ResponseVars;
  _endpoint?: Record<string, unknown>;
  _vars?: Record<string, unknown>;
}

const VARIABLES_PROTO: ThisType<LazyVariables> & Partial<CelVariables> = {
  get conn() {
    if (this._conn) return this._conn;
    return (this._conn = connectionVars(this.input.conn, this.at));
  },
  get endpoint() {
    return (this._endpoint ??= endpointVars(this.input));
  },
  get vars() {
    return (this._vars ??= { ...(this.input.vars ?? {}) });
  },
  ...NAMESPACES,
  get time() {
    return (this._time ??= { now: new Date(this.at) });
  },
  get actions() {
    if (this._actions) return this._actions;
    // Each action's group of variables is shared (with the zero values, or with the phase
    // before) until an action writes it: one object per evaluation instead of a dozen.
    return (this._actions = shareActions(this.input.actions?.service ?? ZERO_SERVICE));
  },
  get req() {
    if (this._req || !this.input.req) return this._req;
    return (this._req = requestVars(this.input.req));
  },
  get res() {
    if (this._res || !this.input.res) return this._res;
    return (this._res = responseVars(this.input.res));
  },
};

const freeze = <T>(value: T): T => {
  if (value && typeof value === 'object') for (const v of Object.values(value)) freeze(v);
  return Object.freeze(value);
};
/** Every action's variables at their zero values; frozen, so a write that forgot actionOutput fails loudly. */
const ZERO_SERVICE: Record<string, Record<string, unknown>> = freeze(zeroActionVars().service);

/** `{ service: g, ngrok: g }`, g being `{ rate_limit: s.rate_limit, ... }`, as an object literal (one group under SPEC's name and the service's) (several times faster than a spread of the frozen object). */
const shareActions = new Function('s', `const g = { ${Object.keys(ZERO_SERVICE).map((k) => `${k}: s.${k}`).join(', ')} }; return { service: g, ngrok: g };`) as (service: Record<string, unknown>) => ActionVariables;

/**
 * The variables of action `name` (`rate_limit`, ...) for an action to set: a copy of the
 * shared values, made on the first write in this evaluation. Actions assign whole fields
 * (never change a field's object or list in place), so a shallow copy is enough.
 */
export function actionOutput(vars: CelVariables, name: string): Record<string, any> {
  const v = vars as LazyVariables;
  const service = v.actions.service;
  const owned = (v._owned ??= []);
  if (!owned.includes(name)) {
    owned.push(name);
    service[name] = { ...service[name] };
  }
  return service[name];
}

/** The CEL variables of a phase, made once per evaluation, each on its first read. */
export function celVariables(input: PolicyInput, now: number): CelVariables {
  const v = Object.create(VARIABLES_PROTO) as LazyVariables;
  v.input = input;
  v.at = now;
  return v;
}
