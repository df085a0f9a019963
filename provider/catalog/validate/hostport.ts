// Edge hostports: `host:port` with a DNS name (optionally a leading `*.` wildcard) or an IP.
import net from 'node:net';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i;

export function hostportProblem(value: string): string | undefined {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value);
  if (!m) return `"${value}" is not a hostport: expected host:port, e.g. app.example.com:443`;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return `"${value}" has port ${port}; ports are 1..65535`;
  const host = m[1].startsWith('[') ? m[1].slice(1, -1) : m[1];
  if (net.isIP(host)) return undefined;
  if (host.length > 253) return `"${value}": host names are at most 253 characters`;
  const labels = host.split('.');
  const body = labels[0] === '*' ? labels.slice(1) : labels;
  if (body.length < 1 || !body.every((l) => LABEL.test(l))) return `"${value}": "${host}" is not a valid host name`;
  return undefined;
}

/** Hostports compare case-insensitively; the stored form is lower case. */
export const canonicalHostport = (value: string) => value.toLowerCase();
