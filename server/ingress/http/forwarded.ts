// What goes upstream from the client's request head, and what comes back: hop-by-hop headers
// (RFC 9110 7.6.1, and those the Connection header names) never cross the edge; the edge
// adds X-Forwarded-For (appended), X-Forwarded-Proto and X-Forwarded-Host. The sign-in
// identity headers (edgeform-auth-*, also spelt with underscores) are dropped: only a sign-in
// module sets them.
import type { IncomingHttpHeaders } from 'node:http';
import { CONNECTION_HEADERS } from '../../../agent/protocol.js';
import { IDENTITY_HEADER_PREFIX } from '../auth/session.js';

const HOP_BY_HOP = new Set<string>([...CONNECTION_HEADERS, 'proxy-authenticate', 'proxy-authorization']);

/**
 * A sign-in identity header, however the client spells it: `edgeform-auth-*`, or with
 * underscores for any of its dashes (`edgeform_auth_email`). Node keeps underscores in names,
 * and many upstreams read `_` as `-` (CGI's HTTP_EDGEFORM_AUTH_EMAIL, PHP, nginx with
 * underscores_in_headers), so the underscore spelling would pass for the edge's own header.
 * Names arrive in lower case.
 */
export function isIdentityHeader(name: string): boolean {
  if (name.length < IDENTITY_HEADER_PREFIX.length || name.charCodeAt(0) !== 101 /* e */) return false;
  const head = name.slice(0, IDENTITY_HEADER_PREFIX.length);
  return head === IDENTITY_HEADER_PREFIX || head.replaceAll('_', '-') === IDENTITY_HEADER_PREFIX;
}

const NONE: ReadonlySet<string> = new Set();
/** The headers a Connection header names; none, or only `keep-alive` (hop-by-hop anyway, and what an upstream's answer says), is one shared empty set. */
function connectionNamed(value: string | string[] | undefined): ReadonlySet<string> {
  if (!value || value === 'keep-alive') return NONE;
  return new Set(String(value).split(',').map((t) => t.trim().toLowerCase()).filter(Boolean));
}

export function upstreamHeadersOf(headers: IncomingHttpHeaders, clientIp: string, hostHeader: string, scheme: string): Record<string, string | string[]> {
  const named = connectionNamed(headers.connection);
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || k.startsWith(':') || HOP_BY_HOP.has(k) || named.has(k) || isIdentityHeader(k)) continue;
    out[k] = v;
  }
  const prior = headers['x-forwarded-for'];
  out['x-forwarded-for'] = prior ? `${Array.isArray(prior) ? prior.join(', ') : prior}, ${clientIp}` : clientIp;
  out['x-forwarded-proto'] = scheme;
  out['x-forwarded-host'] = hostHeader;
  out.host = hostHeader;
  return out;
}

/** Response headers without hop-by-hop ones (and HTTP/2 pseudo-headers). */
export function responseHeadersOf(headers: Record<string, string | string[] | number | undefined>): Record<string, string | string[]> {
  const named = connectionNamed(headers.connection as string | undefined);
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || k.startsWith(':') || HOP_BY_HOP.has(k) || named.has(k)) continue;
    out[k] = typeof v === 'number' ? String(v) : v;
  }
  return out;
}
