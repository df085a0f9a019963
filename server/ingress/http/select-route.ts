// Route selection, pure: a route's `match` is a path (`/api`), a host (`app.example.com`) or
// host plus path (`app.example.com/api`); `match_type` says how the path part compares.
// An exact_path match beats any prefix; among prefixes the longest wins; at equal length a
// match that names the host beats one that does not.
import type { FullDoc } from '../types.js';

export interface RouteMatcher {
  route: FullDoc;
  /** Lower-case host the match names, or undefined for a path-only match. */
  host?: string;
  path: string;
  exact: boolean;
}

export function routeMatcher(route: FullDoc): RouteMatcher {
  const match = String(route.match);
  const exact = route.match_type === 'exact_path';
  if (match.startsWith('/')) return { route, path: match, exact };
  const slash = match.indexOf('/');
  const host = (slash < 0 ? match : match.slice(0, slash)).toLowerCase();
  return { route, host, path: slash < 0 ? '/' : match.slice(slash), exact };
}

const hostMatches = (pattern: string, host: string) =>
  pattern === host || (pattern.startsWith('*.') && host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1);

/** The route for `host` (lower case, no port) and `path` (normalized, no query), or undefined. */
export function selectRoute(matchers: readonly RouteMatcher[], host: string, path: string): FullDoc | undefined {
  let best: RouteMatcher | undefined;
  let bestScore = -1;
  for (const m of matchers) {
    if (m.host !== undefined && !hostMatches(m.host, host)) continue;
    if (m.exact ? path !== m.path : !path.startsWith(m.path)) continue;
    // exact first, then the longest path, then a named host (an exact host before a wildcard).
    const score = (m.exact ? 2 ** 40 : 0) + m.path.length * 4 + (m.host === undefined ? 0 : m.host.startsWith('*.') ? 1 : 2);
    if (score > bestScore) { best = m; bestScore = score; }
  }
  return best?.route;
}

const UNRESERVED = /%(2[DEde]|3[0-9]|4[1-9A-Fa-f]|5[0-9Aa]|5[Ff]|6[1-9A-Fa-f]|7[0-9Aa]|7[Ee])/g;

/**
 * The path routes are matched against and that goes upstream: percent-escapes of unreserved
 * characters decoded and `.`/`..` segments resolved, so `/%61dmin` or `/x/../admin` cannot
 * reach the route of `/admin` while skipping its modules, nor another route reach it.
 */
export function normalizePath(raw: string): string {
  let p = raw.startsWith('/') ? raw : `/${raw}`;
  if (p.includes('%')) p = p.replace(UNRESERVED, (e) => String.fromCharCode(parseInt(e.slice(1), 16)));
  if (!p.includes('/.')) return p;
  const out: string[] = [];
  const segs = p.split('/').slice(1);
  segs.forEach((s, i) => {
    if (s === '.') { if (i === segs.length - 1) out.push(''); return; }
    if (s === '..') { out.pop(); if (i === segs.length - 1) out.push(''); return; }
    out.push(s);
  });
  return `/${out.join('/')}`;
}

/** Splits a request target into its path and its query (with the `?`, or ''). */
export function splitTarget(target: string): { path: string; query: string } {
  const q = target.indexOf('?');
  return q < 0 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q) };
}
