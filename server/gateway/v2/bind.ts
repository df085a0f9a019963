// What a Bind asks for, checked before anything is written: the endpoint's kind and hostname,
// and the protections the application asked for on it. A protection edgeform does not enforce
// on an agent's endpoint refuses the bind (ERR_SERVICE_112, naming each): an application that
// asked for basic auth must never be published without it.
import { randomBytes } from 'node:crypto';
import { ApiError } from '../../http/errors.js';
import { WEBHOOK_PROVIDERS } from '../../../provider/catalog/route-modules.js';

/**
 * Bind options (lower-cased) that are route modules: the SDK's shape → the module's config.
 * These are enforced on the endpoint by the same filters as on an edge's route (agent-endpoints.ts).
 */
const MODULES: Record<string, (v: any) => [string, Record<string, unknown>]> = {
  compression: () => ['compression', {}],
  circuitbreaker: (v) => ['circuit_breaker', { error_threshold_percentage: num(v?.error_threshold, 'circuit_breaker error_threshold', 0, 1) }],
  requestheaders: (v) => ['request_headers', headerEdits(v, 'request_headers')],
  responseheaders: (v) => ['response_headers', headerEdits(v, 'response_headers')],
  useragentfilter: (v) => ['user_agent_filter', { allow: strings(v?.allow, 'user_agent_filter allow'), deny: strings(v?.deny, 'user_agent_filter deny') }],
  webhookverification: (v) => {
    const provider = String(v?.provider ?? '').toLowerCase();
    if (!(WEBHOOK_PROVIDERS as readonly string[]).includes(provider)) throw new ApiError('ERR_SERVICE_112', `webhook_verification: the provider ${JSON.stringify(provider)} is not one this server verifies (${WEBHOOK_PROVIDERS.join(', ')})`);
    if (typeof v?.secret !== 'string' || !v.secret) throw new ApiError('ERR_SERVICE_103', 'webhook_verification needs a secret');
    return ['webhook_verification', { provider, secret: v.secret }];
  },
  websockettcpconverter: () => ['websocket_tcp_converter', {}],
  trafficpolicy: (v) => ['traffic_policy', { value: typeof v === 'string' ? v : JSON.stringify(v) }],
  policy: (v) => ['traffic_policy', { value: typeof v === 'string' ? v : JSON.stringify(v) }],
};

/** Bind options (lower-cased) edgeform does not enforce on an agent's endpoint → the name the refusal uses. */
const REFUSED: Record<string, string> = {
  iprestriction: 'ip_restriction (allow_cidrs/deny_cidrs)', basicauth: 'basic_auth', oauth: 'oauth', oidc: 'oidc',
  mutualtlsca: 'mutual_tls', tlstermination: 'tls_termination', mutualtlsatedge: 'mutual_tls',
};

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
}

/** The endpoint a Bind asks for, or the ApiError it is refused with. `o` is the message with lower-cased keys. */
export function checkBind(o: any, endpointDomain: string, tcpPorts?: { first: number; last: number }): BindAsk {
  const proto = String(o.proto ?? '');
  if (proto === 'tcp' && !tcpPorts) throw new ApiError('ERR_SERVICE_112', 'this server serves no TCP endpoints (edgeform serve --agent-tcp-ports FIRST-LAST); bind an https endpoint, or a labeled tunnel behind a TCP edge');
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
  if (typeof opts.auth === 'string' && opts.auth) asked.add('basic_auth');
  if (opts.hostheaderrewrite === true) asked.add('host_header_rewrite');
  if (opts.proxyproto !== undefined && opts.proxyproto !== 0 && opts.proxyproto !== null) asked.add('proxy_proto');
  if (typeof extra.ippolicyref === 'string' && extra.ippolicyref) asked.add('ip_restriction (IPPolicyRef)');
  const bindings = Array.isArray(extra.bindings) ? extra.bindings : [];
  if (bindings.some((b) => b !== 'public')) asked.add(`bindings ${bindings.join(',')}`);
  if (extra.poolingenabled === true) asked.add('pooling');
  if (asked.size) {
    throw new ApiError('ERR_SERVICE_112', `this server does not enforce ${[...asked].join(', ')} on an agent's endpoint, and never publishes one without a protection it was asked for; ` +
      'remove it from the listener and use a labeled listener behind an https edge whose route has the equivalent module instead (docs/agents.md)');
  }
  const str = (v: unknown) => (typeof v === 'string' ? v.trim().toLowerCase() : '');
  if (proto === 'tcp') {
    const addr = str(opts.addr) || (str(opts.url).startsWith('tcp://') ? str(opts.url).slice(6) : '');
    if (!addr) return { proto, hostname: endpointDomain, modules, port: undefined };
    const m = /^(.+):(\d{1,5})$/.exec(addr);
    const port = Number(m?.[2]);
    if (!m || m[1] !== endpointDomain || port < tcpPorts!.first || port > tcpPorts!.last) {
      throw new ApiError('ERR_SERVICE_103', `the TCP address ${JSON.stringify(addr)} is not one this server serves: ${endpointDomain}:${tcpPorts!.first} to ${endpointDomain}:${tcpPorts!.last}, or none for a free one`);
    }
    return { proto, hostname: endpointDomain, modules, port };
  }
  let hostname = str(opts.domain) || str(opts.hostname) || (str(opts.subdomain) ? `${str(opts.subdomain)}.${endpointDomain}` : '');
  if (!hostname && typeof opts.url === 'string' && opts.url) {
    try {
      hostname = new URL(opts.url).hostname.toLowerCase();
    } catch {
      throw new ApiError('ERR_SERVICE_103', `the endpoint URL ${JSON.stringify(opts.url)} does not parse`);
    }
  }
  if (!hostname) hostname = `${randomBytes(6).toString('hex')}.${endpointDomain}`;
  if (!HOSTNAME.test(hostname)) throw new ApiError('ERR_SERVICE_103', `the endpoint hostname ${JSON.stringify(hostname)} is not a valid DNS name`);
  return { proto, hostname, modules };
}
