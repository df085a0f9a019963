// What a Bind asks for, checked before anything is written: the endpoint's kind and hostname,
// and the protections the application asked for on it. A protection edgeform does not enforce
// on an agent's endpoint refuses the bind (ERR_SERVICE_112, naming each): an application that
// asked for basic auth must never be published without it.
import { randomBytes } from 'node:crypto';
import { ApiError } from '../../http/errors.js';

/** Bind option (lower-cased) → the name the docs and the refusal use. */
const PROTECTIONS: Record<string, string> = {
  compression: 'compression', circuitbreaker: 'circuit_breaker', iprestriction: 'ip_restriction', basicauth: 'basic_auth',
  oauth: 'oauth', oidc: 'oidc', webhookverification: 'webhook_verification', mutualtlsca: 'mutual_tls',
  requestheaders: 'request_headers', responseheaders: 'response_headers', websockettcpconverter: 'websocket_tcp_converter',
  useragentfilter: 'user_agent_filter', trafficpolicy: 'traffic_policy', policy: 'traffic_policy',
  tlstermination: 'tls_termination', mutualtlsatedge: 'mutual_tls',
};

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/;

export interface BindAsk { proto: string; hostname: string }

/** The endpoint a Bind asks for, or the ApiError it is refused with. `o` is the message with lower-cased keys. */
export function checkBind(o: any, endpointDomain: string): BindAsk {
  const proto = String(o.proto ?? '');
  if (proto === 'tcp' || proto === 'tls') {
    throw new ApiError('ERR_SERVICE_112', `${proto} endpoints are not served over the version-2 protocol by this server yet; bind an http or https endpoint, or a labeled tunnel behind a ${proto} edge`);
  }
  if (proto !== 'http' && proto !== 'https') throw new ApiError('ERR_SERVICE_112', `the endpoint protocol ${JSON.stringify(proto)} is not one of http, https`);
  const opts = (o.opts && typeof o.opts === 'object' ? o.opts : {}) as Record<string, unknown>;
  const extra = (o.extra && typeof o.extra === 'object' ? o.extra : {}) as Record<string, unknown>;
  const asked = new Set<string>();
  for (const [k, name] of Object.entries(PROTECTIONS)) if (opts[k] !== null && opts[k] !== undefined && opts[k] !== '') asked.add(name);
  if (typeof opts.auth === 'string' && opts.auth) asked.add('basic_auth');
  if (opts.hostheaderrewrite === true) asked.add('host_header_rewrite');
  if (opts.proxyproto !== undefined && opts.proxyproto !== 0 && opts.proxyproto !== null) asked.add('proxy_proto');
  if (typeof extra.ippolicyref === 'string' && extra.ippolicyref) asked.add('ip_restriction (IPPolicyRef)');
  const bindings = Array.isArray(extra.bindings) ? extra.bindings : [];
  if (bindings.some((b) => b !== 'public')) asked.add(`bindings ${bindings.join(',')}`);
  if (extra.poolingenabled === true) asked.add('pooling');
  if (asked.size) {
    throw new ApiError('ERR_SERVICE_112', `this server does not enforce ${[...asked].join(', ')} on an agent's endpoint, and never publishes one without a protection it was asked for; ` +
      'remove it from the listener and put the endpoint behind an https edge with the equivalent route module instead (docs/agents.md)');
  }
  const str = (v: unknown) => (typeof v === 'string' ? v.trim().toLowerCase() : '');
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
  return { proto, hostname };
}
