// An endpoint's URL (the service's cloud and agent endpoints): scheme https, http, tcp or tls,
// a host, and a port (the scheme's default when left out; tcp needs one). A host under
// `.internal` makes an internal endpoint, reachable only through forward-internal.

export const ENDPOINT_SCHEMES = ['https', 'http', 'tcp', 'tls'] as const;
export type EndpointScheme = (typeof ENDPOINT_SCHEMES)[number];

const DEFAULT_PORT: Record<EndpointScheme, number | undefined> = { https: 443, http: 80, tls: 443, tcp: undefined };

export interface EndpointUrl {
  scheme: EndpointScheme;
  /** Lower case, no trailing dot. */
  host: string;
  port: number;
  /** The canonical spelling: `scheme://host`, with `:port` when it is not the scheme's default (always for tcp). */
  url: string;
  /** `host:port`, as edges' hostports spell it. */
  hostport: string;
  internal: boolean;
}

const HOST = /^(?=.{1,253}$)(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export const isInternalHost = (host: string) => host === 'internal' || host.endsWith('.internal');

/** The parsed URL, or a message saying what is wrong with it. */
export function parseEndpointUrl(text: string): EndpointUrl | string {
  const m = /^([a-z]+):\/\/([^/?#]*)(.*)$/i.exec(text.trim());
  if (!m) return 'must be scheme://host[:port], with scheme https, http, tcp or tls';
  const scheme = m[1].toLowerCase();
  if (!(ENDPOINT_SCHEMES as readonly string[]).includes(scheme)) return `scheme "${scheme}" is not one of ${ENDPOINT_SCHEMES.join(', ')}`;
  if (m[3] !== '' && m[3] !== '/') return 'must not have a path, query or fragment (an endpoint is a scheme, host and port; match paths in its traffic policy)';
  const authority = m[2];
  if (authority.includes('@')) return 'must not carry a user name or password';
  const hp = /^([^:]+)(?::(\d{1,5}))?$/.exec(authority);
  if (!hp) return 'must name a host, and at most one port';
  const host = hp[1].toLowerCase().replace(/\.$/, '');
  if (!HOST.test(host)) return `host "${hp[1]}" is not a valid DNS name`;
  const s = scheme as EndpointScheme;
  const port = hp[2] !== undefined ? Number(hp[2]) : DEFAULT_PORT[s];
  if (port === undefined) return 'a tcp endpoint needs a port (tcp://host:PORT)';
  if (port < 1 || port > 65535) return `port ${port} is not from 1 to 65535`;
  const url = `${s}://${host}${s === 'tcp' || port !== DEFAULT_PORT[s] ? `:${port}` : ''}`;
  return { scheme: s, host, port, url, hostport: `${host}:${port}`, internal: isInternalHost(host) };
}

/** The policy phase that decides what a request or connection of the scheme gets. */
export const decidingPhase = (scheme: EndpointScheme) => (scheme === 'http' || scheme === 'https' ? 'on_http_request' : 'on_tcp_connect');
