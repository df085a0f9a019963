// Edge hostports: `host:port` with a DNS name (optionally a leading `*.` wildcard) or an IP.
import net from 'node:net';
import { canonicalIpv6 } from './cidr.js';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i;

export function hostportProblem(value: string): string | undefined {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value);
  if (!m) return `"${value}" is not a hostport: expected host:port, e.g. app.example.com:443`;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return `"${value}" has port ${port}; ports are 1..65535`;
  const host = m[1].startsWith('[') ? m[1].slice(1, -1) : m[1];
  // A zone (fe80::1%eth0) names an interface of one machine and means nothing at an edge.
  if (host.includes('%')) return `"${value}": an IPv6 zone (%...) names a local interface; leave it out`;
  if (net.isIP(host)) return undefined;
  if (host.length > 253) return `"${value}": host names are at most 253 characters`;
  const labels = host.split('.');
  const body = labels[0] === '*' ? labels.slice(1) : labels;
  if (body.length < 1 || !body.every((l) => LABEL.test(l))) return `"${value}": "${host}" is not a valid host name`;
  return undefined;
}

/**
 * The stored form of a valid hostport, so that spellings of one hostport compare equal
 * (uniqueness, plan diffs): names in lower case, the port without leading zeros, an IPv6 host in RFC 5952 form
 * (`[2001:0DB8:0:0::1]:443` -> `[2001:db8::1]:443`).
 */
export function canonicalHostport(value: string): string {
  const at = value.lastIndexOf(':');
  const host = value.slice(0, at);
  const port = Number(value.slice(at + 1)); // :0443 is :443
  const v6 = /^\[(.+)\]$/.exec(host)?.[1];
  return `${v6 && net.isIPv6(v6) ? `[${canonicalIpv6(v6)}]` : host.toLowerCase()}:${port}`;
}
