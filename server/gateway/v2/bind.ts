// What a Bind asks for, checked before anything is written: the endpoint's kind and hostname,
// and the protections the application asked for on it. Each protection edgeform enforces
// becomes the route module that enforces it on an edge's route, its settings checked by that
// module's own schema (the API's); basic auth, which no route module of the API has, is a
// module of the ingress that only agents' endpoints use (ingress/modules/basic-auth.ts). A
// protection edgeform does not enforce refuses the bind (ERR_SERVICE_112, naming each): an
// application that asked for it must never be published without it.
import { randomBytes } from 'node:crypto';
import { ApiError } from '../../http/errors.js';
import { OAUTH_PROVIDERS, routeModules } from '../../../provider/catalog/route-modules.js';
import { parseCidr } from '../../../provider/catalog/validate/cidr.js';
import { isInternalHost } from '../../../provider/catalog/validate/endpoint-url.js';
import { BASIC_AUTH_LIMITS } from '../../ingress/modules/basic-auth.js';

/** The module's config as the API would store it (defaults applied), or ERR_SERVICE_103 naming what the schema refused. */
function viaSchema(name: keyof typeof routeModules, config: Record<string, unknown>, what = name): Record<string, unknown> {
  const r = routeModules[name].safeParse(config);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new ApiError('ERR_SERVICE_103', `${what}${issue.path.length ? ` ${issue.path.join('.')}` : ''}: ${issue.message}`);
  }
  return r.data as Record<string, unknown>;
}

/**
 * Bind options (lower-cased) that are route modules: the SDK's shape → the module's config.
 * These are enforced on the endpoint by the same filters as on an edge's route (agent-endpoints.ts).
 */
const MODULES: Record<string, (v: any) => [string, Record<string, unknown>]> = {
  compression: () => ['compression', viaSchema('compression', {})],
  circuitbreaker: (v) => ['circuit_breaker', viaSchema('circuit_breaker', { error_threshold_percentage: num(v?.error_threshold, 'circuit_breaker error_threshold', 0, 1) })],
  requestheaders: (v) => ['request_headers', viaSchema('request_headers', headerEdits(v, 'request_headers'))],
  responseheaders: (v) => ['response_headers', viaSchema('response_headers', headerEdits(v, 'response_headers'))],
  useragentfilter: (v) => ['user_agent_filter', viaSchema('user_agent_filter', { allow: strings(v?.allow, 'user_agent_filter allow'), deny: strings(v?.deny, 'user_agent_filter deny') })],
  webhookverification: (v) => {
    const provider = String(v?.provider ?? '').toLowerCase();
    if (typeof v?.secret !== 'string' || !v.secret) throw new ApiError('ERR_SERVICE_103', 'webhook_verification needs a secret');
    try {
      return ['webhook_verification', viaSchema('webhook_verification', { provider, secret: v.secret })];
    } catch (e) {
      throw new ApiError('ERR_SERVICE_112', `webhook_verification: ${(e as Error).message.replace(/^webhook_verification( provider)?: /, '')}`);
    }
  },
  websockettcpconverter: () => ['websocket_tcp_converter', viaSchema('websocket_tcp_converter', {})],
  trafficpolicy: (v) => ['traffic_policy', { value: typeof v === 'string' ? v : JSON.stringify(v) }],
  policy: (v) => ['traffic_policy', { value: typeof v === 'string' ? v : JSON.stringify(v) }],
  iprestriction: (v) => ['ip_restriction', ipRestriction(v)],
  basicauth: (v) => ['basic_auth', basicAuth(Array.isArray(v?.credentials) ? v.credentials : [])],
  oauth: (v) => ['oauth', oauth(v)],
  oidc: (v) => ['oidc', oidc(v)],
};

/** Bind options (lower-cased) edgeform does not enforce on an agent's endpoint → the name the refusal uses. */
const REFUSED: Record<string, string> = {
  mutualtlsca: 'mutual_tls', tlstermination: 'tls_termination', mutualtlsatedge: 'mutual_tls',
};

/** IPRestriction {allow_cidrs, deny_cidrs}: the rules inline (ingress/modules/ip-restriction.ts), each a CIDR as an IP policy rule's. */
function ipRestriction(v: any): Record<string, unknown> {
  const list = (x: unknown, what: string) => {
    const out: string[] = [];
    for (const c of strings(x, `ip_restriction ${what}`)) {
      const r = parseCidr(c);
      if (!r.ok) throw new ApiError('ERR_SERVICE_103', `ip_restriction ${what}: ${r.message}`);
      out.push(r.value);
    }
    return out;
  };
  const allow = list(v?.allow_cidrs, 'allow_cidrs');
  const deny = list(v?.deny_cidrs, 'deny_cidrs');
  if (!allow.length && !deny.length) throw new ApiError('ERR_SERVICE_103', 'ip_restriction needs at least one CIDR in allow_cidrs or deny_cidrs');
  return { enabled: true, ip_policy_ids: [], allow_cidrs: allow, deny_cidrs: deny };
}

/** BasicAuth {credentials: [{username, cleartext_password}]}, or the legacy Auth "user:password": the service's bounds. */
function basicAuth(entries: any[]): Record<string, unknown> {
  const { credentials: most, password: [min, max], username: maxUser } = BASIC_AUTH_LIMITS;
  if (!entries.length) throw new ApiError('ERR_SERVICE_103', 'basic_auth needs at least one credential');
  if (entries.length > most) throw new ApiError('ERR_SERVICE_103', `basic_auth takes at most ${most} credentials, not ${entries.length}`);
  const credentials = entries.map((c, i) => {
    const username = c?.username;
    const password = c?.cleartext_password;
    if (typeof username !== 'string' || !username || username.length > maxUser || username.includes(':')) throw new ApiError('ERR_SERVICE_103', `basic_auth credential ${i + 1}: the username must be 1 to ${maxUser} characters without ":"`);
    if (typeof password !== 'string' || !password) {
      throw new ApiError('ERR_SERVICE_112', `basic_auth credential ${i + 1} (${username}) has no cleartext_password: this server does not check hashed_password; give the password itself`);
    }
    if (password.length < min || password.length > max) throw new ApiError('ERR_SERVICE_103', `basic_auth credential ${i + 1} (${username}): the password must be ${min} to ${max} characters, not ${password.length}`);
    return { username, password };
  });
  return { enabled: true, credentials };
}

const lowerList = (v: unknown, what: string) => strings(v, what);

/** OAuth {provider, client_id, client_secret, allow_emails, allow_domains, scopes} as the oauth module's provider member. */
function oauth(v: any): Record<string, unknown> {
  const provider = String(v?.provider ?? '').toLowerCase();
  if (!(OAUTH_PROVIDERS as readonly string[]).includes(provider)) throw new ApiError('ERR_SERVICE_112', `oauth: the provider ${JSON.stringify(v?.provider ?? '')} is not one this server signs in with (${OAUTH_PROVIDERS.join(', ')})`);
  const member: Record<string, unknown> = {
    scopes: lowerList(v?.scopes, 'oauth scopes'), email_addresses: lowerList(v?.allow_emails, 'oauth allow_emails'), email_domains: lowerList(v?.allow_domains, 'oauth allow_domains'),
  };
  if (typeof v?.client_id === 'string' && v.client_id) member.client_id = v.client_id;
  if (typeof v?.client_secret === 'string' && v.client_secret) member.client_secret = v.client_secret;
  if (v?.sealed_client_secret) throw new ApiError('ERR_SERVICE_112', 'oauth: this server cannot open a sealed_client_secret; give client_secret');
  return viaSchema('oauth', { provider: { [provider]: member } });
}

/**
 * OIDC {issuer_url, client_id, client_secret, allow_emails, allow_domains, scopes} as the oidc
 * module; the allow lists, which the API's oidc module does not have, are checked against the
 * ID token's verified email as the oauth module checks its lists (auth/oidc.ts).
 */
function oidc(v: any): Record<string, unknown> {
  if (v?.sealed_client_secret) throw new ApiError('ERR_SERVICE_112', 'oidc: this server cannot open a sealed_client_secret; give client_secret');
  const config = viaSchema('oidc', { issuer: v?.issuer_url, client_id: v?.client_id || undefined, client_secret: v?.client_secret || undefined, scopes: lowerList(v?.scopes, 'oidc scopes') });
  return { ...config, email_addresses: lowerList(v?.allow_emails, 'oidc allow_emails'), email_domains: lowerList(v?.allow_domains, 'oidc allow_domains') };
}

function num(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== 'number' || !(v >= min && v <= max)) throw new ApiError('ERR_SERVICE_103', `${what} must be a number from ${min} to ${max}`);
  return v;
}

function strings(v: unknown, what: string): string[] {
  if (v == null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string') || v.length > 100) throw new ApiError('ERR_SERVICE_103', `${what} must be a list of at most 100 strings`);
  return v;
}

/** The SDK's `{add: ["name:value"], remove: [names]}` as a module's `{add: {name: value}, remove}`. */
function headerEdits(v: any, what: string) {
  const add: Record<string, string> = {};
  for (const entry of strings(v?.add, `${what} add`)) {
    const colon = entry.indexOf(':');
    if (colon <= 0) throw new ApiError('ERR_SERVICE_103', `${what} add takes "name:value", not ${JSON.stringify(entry)}`);
    add[entry.slice(0, colon).trim().toLowerCase()] = entry.slice(colon + 1).trim();
  }
  return { add, remove: strings(v?.remove, `${what} remove`) };
}

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/;

export interface BindAsk {
  proto: string;
  hostname: string;
  /** Route modules the endpoint runs (their configs by module name); empty when none was asked for. */
  modules: Record<string, Record<string, unknown>>;
  /** A TCP endpoint's port, when one was asked for (else a free one in the range is taken). */
  port?: number;
  /** Bound `internal` (a name under .internal): reached only through forward-internal (issue 36). */
  internal: boolean;
  /** pooling_enabled: endpoints at one URL that all enable it form a pool. */
  pooled: boolean;
}

/** The endpoint a Bind asks for, or the ApiError it is refused with. `o` is the message with lower-cased keys. */
export function checkBind(o: any, endpointDomain: string, tcpPorts?: { first: number; last: number }): BindAsk {
  const proto = String(o.proto ?? '');
  if (proto !== 'http' && proto !== 'https' && proto !== 'tcp' && proto !== 'tls') throw new ApiError('ERR_SERVICE_112', `the endpoint protocol ${JSON.stringify(proto)} is not one of http, https, tcp, tls`);
  const opts = (o.opts && typeof o.opts === 'object' ? o.opts : {}) as Record<string, unknown>;
  const extra = (o.extra && typeof o.extra === 'object' ? o.extra : {}) as Record<string, unknown>;
  const asked = new Set<string>();
  const present = (k: string) => opts[k] !== null && opts[k] !== undefined && opts[k] !== '';
  for (const [k, name] of Object.entries(REFUSED)) if (present(k)) asked.add(name);
  const modules: Record<string, Record<string, unknown>> = {};
  for (const [k, make] of Object.entries(MODULES)) {
    if (!present(k)) continue;
    const [name, config] = make(opts[k]);
    if (modules[name]) throw new ApiError('ERR_SERVICE_103', `${name} is given twice (Policy and TrafficPolicy)`);
    modules[name] = config;
  }
  // The legacy Auth "user:password" is basic auth (one credential).
  if (typeof opts.auth === 'string' && opts.auth) {
    if (modules.basic_auth) throw new ApiError('ERR_SERVICE_103', 'basic auth is given twice (Auth and BasicAuth)');
    const colon = opts.auth.indexOf(':');
    modules.basic_auth = basicAuth([{ username: colon < 0 ? opts.auth : opts.auth.slice(0, colon), cleartext_password: colon < 0 ? '' : opts.auth.slice(colon + 1) }]);
  }
  if (opts.hostheaderrewrite === true) asked.add('host_header_rewrite');
  if (opts.proxyproto !== undefined && opts.proxyproto !== 0 && opts.proxyproto !== null) asked.add('proxy_proto');
  if (typeof extra.ippolicyref === 'string' && extra.ippolicyref) asked.add('ip_restriction (IPPolicyRef)');
  const bindings = Array.isArray(extra.bindings) ? extra.bindings : [];
  // One binding, public or internal (issue 36); kubernetes, or several, stay refused.
  if (bindings.length > 1 || bindings.some((b) => b !== 'public' && b !== 'internal')) asked.add(`bindings ${bindings.join(',')}`);
  const pooled = extra.poolingenabled === true;
  if (asked.size) {
    throw new ApiError('ERR_SERVICE_112', `this server does not enforce ${[...asked].join(', ')} on an agent's endpoint, and never publishes one without a protection it was asked for; ` +
      'remove it from the listener and use a labeled listener behind an https edge whose route has the equivalent module instead (docs/agents.md)');
  }
  const str = (v: unknown) => (typeof v === 'string' ? v.trim().toLowerCase() : '');
  const wantsInternal = bindings[0] === 'internal';
  /** The binding follows the name: internal exactly for a name under .internal. */
  const bound = (hostname: string) => {
    const internal = isInternalHost(hostname);
    if (wantsInternal && !internal) throw new ApiError('ERR_SERVICE_103', `an internal endpoint's URL must be under .internal (e.g. https://api.internal), not ${JSON.stringify(hostname)}`);
    if (bindings[0] === 'public' && internal) throw new ApiError('ERR_SERVICE_103', `the URL ${JSON.stringify(hostname)} is under .internal, which is bound internal, not public`);
    return internal;
  };
  if (proto === 'tcp') {
    const addr = str(opts.addr) || (str(opts.url).startsWith('tcp://') ? str(opts.url).slice(6) : '');
    if (wantsInternal && !addr) throw new ApiError('ERR_SERVICE_103', 'an internal TCP endpoint needs its URL: tcp://NAME.internal:PORT');
    // An internal TCP endpoint is reached by its name and any port (forward-internal), never on a public port.
    const named = /^(.+\.internal):(\d{1,5})$/.exec(addr);
    if (named && Number(named[2]) >= 1 && Number(named[2]) <= 65535 && bound(named[1])) return { proto, hostname: named[1], modules, port: Number(named[2]), internal: true, pooled };
    if (addr) bound(addr.replace(/:\d*$/, ''));
    if (!tcpPorts) throw new ApiError('ERR_SERVICE_112', 'this server serves no TCP endpoints (edgeform serve --agent-tcp-ports FIRST-LAST); bind an https endpoint, an internal one (tcp://NAME.internal:PORT), or a labeled tunnel behind a TCP edge');
    if (!addr) return { proto, hostname: endpointDomain, modules, port: undefined, internal: false, pooled };
    const m = /^(.+):(\d{1,5})$/.exec(addr);
    const port = Number(m?.[2]);
    if (!m || m[1] !== endpointDomain || port < tcpPorts!.first || port > tcpPorts!.last) {
      throw new ApiError('ERR_SERVICE_103', `the TCP address ${JSON.stringify(addr)} is not one this server serves: ${endpointDomain}:${tcpPorts!.first} to ${endpointDomain}:${tcpPorts!.last}, or none for a free one`);
    }
    return { proto, hostname: endpointDomain, modules, port, internal: false, pooled };
  }
  let hostname = str(opts.domain) || str(opts.hostname) || (str(opts.subdomain) ? `${str(opts.subdomain)}.${endpointDomain}` : '');
  if (!hostname && typeof opts.url === 'string' && opts.url) {
    try {
      hostname = new URL(opts.url).hostname.toLowerCase();
    } catch {
      throw new ApiError('ERR_SERVICE_103', `the endpoint URL ${JSON.stringify(opts.url)} does not parse`);
    }
  }
  if (!hostname && wantsInternal) throw new ApiError('ERR_SERVICE_103', 'an internal endpoint needs its URL (e.g. https://api.internal)');
  if (!hostname) hostname = `${randomBytes(6).toString('hex')}.${endpointDomain}`;
  if (!HOSTNAME.test(hostname)) throw new ApiError('ERR_SERVICE_103', `the endpoint hostname ${JSON.stringify(hostname)} is not a valid DNS name`);
  return { proto, hostname, modules, internal: bound(hostname), pooled };
}
