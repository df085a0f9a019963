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
  /** The path in lower case, for the check that another spelling would not choose another route. */
  folded: string;
  exact: boolean;
}

export function routeMatcher(route: FullDoc): RouteMatcher {
  const match = String(route.match);
  const exact = route.match_type === 'exact_path';
  if (match.startsWith('/')) return { route, path: match, folded: match.toLowerCase(), exact };
  const slash = match.indexOf('/');
  const host = (slash < 0 ? match : match.slice(0, slash)).toLowerCase();
  const path = slash < 0 ? '/' : match.slice(slash);
  return { route, host, path, folded: path.toLowerCase(), exact };
}

const hostMatches = (pattern: string, host: string) =>
  pattern === host || (pattern.startsWith('*.') && host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1);

/** The route for `host` (lower case, no port) and `path` (normalized, no query), or undefined. */
export function selectRoute(matchers: readonly RouteMatcher[], host: string, path: string): FullDoc | undefined {
  return best(matchers, host, path, false).route;
}

/** The best match and its score (exact first, then the longest path, then a named host: an exact host before a wildcard). */
function best(matchers: readonly RouteMatcher[], host: string, path: string, folded: boolean): { route?: FullDoc; score: number } {
  let found: RouteMatcher | undefined;
  let bestScore = -1;
  for (const m of matchers) {
    if (m.host !== undefined && !hostMatches(m.host, host)) continue;
    const mp = folded ? m.folded : m.path;
    if (m.exact ? path !== mp : !path.startsWith(mp)) continue;
    const score = (m.exact ? 2 ** 40 : 0) + mp.length * 4 + (m.host === undefined ? 0 : m.host.startsWith('*.') ? 1 : 2);
    if (score > bestScore) { found = m; bestScore = score; }
  }
  return { route: found?.route, score: bestScore };
}

/** Whether any route's match spells its path with capitals (cached per matcher list: a table version's edge). */
const capitals = new WeakMap<readonly RouteMatcher[], boolean>();
function anyCapitals(matchers: readonly RouteMatcher[]): boolean {
  let v = capitals.get(matchers);
  if (v === undefined) capitals.set(matchers, (v = matchers.some((m) => m.folded !== m.path)));
  return v;
}

/**
 * The route for a request and the check that no other spelling of its path would choose
 * another: `path` is the canonical path (readPath), matched as sent (case included). Some
 * upstreams read `/ADMIN` as `/admin` (case-insensitive file systems), `/admin;x` as `/admin`
 * (path parameters: Tomcat, Spring) and `/admin/` as `/admin` (Express, most frameworks). So
 * when the path with any of those differences taken away (compared case-insensitively, its
 * `;` parameters removed, one trailing slash removed, alone or together) would choose another
 * route than the path as sent, the request is refused (`ambiguous`): the upstream of one route
 * is never reached through another route, past the first route's modules. Only a variant that
 * chooses a route at least as specific as the path as sent counts (`/api/` on a route `/api/` is
 * served though `/api` would fall to `/`); one that chooses no route, the same route or a
 * broader one is served as sent.
 */
export function chooseRoute(matchers: readonly RouteMatcher[], host: string, path: string): { route?: FullDoc; ambiguous?: string } {
  const { route, score } = best(matchers, host, path, false);
  if (!route || matchers.length < 2) return { route };
  const params = path.includes(';');
  const trailing = path.length > 1 && path.endsWith('/');
  const fold = path !== path.toLowerCase() || anyCapitals(matchers);
  if (!params && !trailing && !fold) return { route };
  for (let set = 1; set < 8; set++) {
    const f = (set & 1) !== 0, p = (set & 2) !== 0, t = (set & 4) !== 0;
    if ((f && !fold) || (p && !params) || (t && !trailing)) continue;
    let v = p ? path.replace(/;[^/]*/g, '') : path;
    if (t && v.length > 1 && v.endsWith('/')) v = v.slice(0, -1);
    if (f) v = v.toLowerCase();
    const other = best(matchers, host, v, f);
    if (other.route && other.route !== route && other.score >= score) return { route, ambiguous: `${path} would be another route's path to an upstream that reads ${[f && 'case', p && '; parameters', t && 'a trailing slash'].filter(Boolean).join(' and ')} differently` };
  }
  return { route };
}

const UNRESERVED = /%(2[DEde]|3[0-9]|4[1-9A-Fa-f]|5[0-9Aa]|5[Ff]|6[1-9A-Fa-f]|7[0-9Aa]|7[Ee])/g;

/**
 * A request's path as routes see it and as it goes upstream (normalizePath), or why it is
 * refused: spellings upstreams disagree on, which no normal form can make safe. A backslash
 * (some servers read it as `/`), an escaped `/` or `\` (`%2F`, `%5C`: one segment to the edge,
 * two to a server that decodes before splitting), an escaped control character, a `%` not
 * followed by two hex digits, and a `.` or `..` segment with `;` parameters (`/x/..;/admin` is
 * `/admin` to Tomcat).
 */
export function readPath(raw: string): { path: string; refused?: undefined } | { refused: string } {
  if (raw.includes('\\')) return { refused: 'a backslash' };
  for (let i = raw.indexOf('%'); i >= 0; i = raw.indexOf('%', i + 1)) {
    const hex = raw.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return { refused: 'a % not followed by two hex digits' };
    const c = parseInt(hex, 16);
    if (c === 0x2f) return { refused: 'an escaped slash (%2F)' };
    if (c === 0x5c) return { refused: 'an escaped backslash (%5C)' };
    if (c < 0x20 || c === 0x7f) return { refused: 'an escaped control character' };
  }
  const path = normalizePath(raw);
  if (path.includes(';') && /(^|\/)\.\.?;/.test(path)) return { refused: 'a dot segment with ; parameters' };
  return { path };
}

/**
 * The path routes are matched against and that goes upstream: percent-escapes of unreserved
 * characters decoded, runs of `/` merged into one, then `.`/`..` segments resolved (RFC 3986
 * 5.2.4), so `/%61dmin`, `//admin` or `/x/../admin` cannot reach the route of `/admin` while
 * skipping its modules, nor another route reach it.
 */
export function normalizePath(raw: string): string {
  let p = raw.startsWith('/') ? raw : `/${raw}`;
  if (p.includes('%')) p = p.replace(UNRESERVED, (e) => String.fromCharCode(parseInt(e.slice(1), 16)));
  if (p.includes('//')) p = p.replace(/\/{2,}/g, '/');
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
