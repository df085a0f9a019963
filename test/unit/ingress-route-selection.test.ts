// Route selection (server/ingress/http/select-route.ts): a table of cases with a reason each.
import { describe, expect, it } from 'vitest';
import { chooseRoute, normalizePath, readPath, routeMatcher, selectRoute } from '../../server/ingress/http/select-route.js';

const routes = [
  { id: 'root', match: '/', match_type: 'path_prefix' },
  { id: 'api', match: '/api', match_type: 'path_prefix' },
  { id: 'api-v1', match: '/api/v1', match_type: 'path_prefix' },
  { id: 'health', match: '/api/health', match_type: 'exact_path' },
  { id: 'host-api', match: 'admin.example.com/api', match_type: 'path_prefix' },
  { id: 'host-only', match: 'other.example.com', match_type: 'path_prefix' },
  { id: 'wild', match: '*.wild.example.com/x', match_type: 'path_prefix' },
  { id: 'exact-login', match: '/login', match_type: 'exact_path' },
].map(routeMatcher);

describe('selectRoute', () => {
  it.each([
    ['the longest prefix wins', 'app.example.com', '/api/v1/users', 'api-v1'],
    ['a shorter prefix when the longer does not match', 'app.example.com', '/api/v2', 'api'],
    ['exact_path beats every prefix', 'app.example.com', '/api/health', 'health'],
    ['exact_path does not match a longer path', 'app.example.com', '/api/health/x', 'api'],
    ['/ is the catch-all prefix', 'app.example.com', '/anything', 'root'],
    ['host plus path beats a path-only prefix of the same length', 'admin.example.com', '/api/x', 'host-api'],
    ['host plus path does not apply to other hosts', 'app.example.com', '/api/x', 'api'],
    ['a host-only match covers every path of that host, beating /', 'other.example.com', '/z', 'host-only'],
    ['a wildcard host covers one more label', 'a.wild.example.com', '/x/1', 'wild'],
    ['a wildcard host does not cover the bare domain', 'wild.example.com', '/x/1', 'root'],
    ['exact_path equal only', 'app.example.com', '/login', 'exact-login'],
  ])('%s', (_why, host, path, id) => {
    expect(selectRoute(routes, host, path)?.id).toBe(id);
  });

  it('no route matches: undefined (the handler answers 404)', () => {
    const only = [{ id: 'a', match: '/a', match_type: 'exact_path' }].map(routeMatcher);
    expect(selectRoute(only, 'app.example.com', '/b')).toBeUndefined();
  });
});

describe('normalizePath', () => {
  it.each([
    ['unchanged', '/a/b', '/a/b'],
    ['an escaped unreserved letter is decoded', '/%61dmin', '/admin'],
    ['dot segments resolve', '/x/../admin/./y', '/admin/y'],
    ['.. cannot climb above the root', '/../../admin', '/admin'],
    ['an escaped slash stays escaped', '/a%2Fb', '/a%2Fb'],
    ['a trailing .. keeps the directory form', '/a/b/..', '/a/'],
    ['runs of slashes are one', '//admin//x', '/admin/x'],
    ['slashes merge before dots resolve', '/a//../b', '/b'],
  ])('%s', (_why, raw, want) => {
    expect(normalizePath(raw)).toBe(want);
  });
});

describe('readPath', () => {
  it.each([
    ['a backslash', '/\\admin'],
    ['an escaped slash', '/x%2fadmin'],
    ['an escaped slash in capitals', '/x%2Fadmin'],
    ['an escaped backslash', '/x%5cadmin'],
    ['an escaped NUL', '/admin%00'],
    ['a % without two hex digits', '/admin%zz'],
    ['a dot-dot segment with parameters', '/x/..;/admin'],
    ['an escaped dot-dot segment with parameters', '/x/%2e%2e;y/admin'],
  ])('refuses %s', (_why, raw) => {
    expect(readPath(raw).refused).toEqual(expect.any(String));
  });

  it('reads the rest in normal form', () => {
    expect(readPath('//%61dmin/./x')).toEqual({ path: '/admin/x' });
    expect(readPath('/a;b/c%20d')).toEqual({ path: '/a;b/c%20d' });
  });
});

describe('chooseRoute: no spelling reaches a more specific route through a broader one', () => {
  const guarded = [
    { id: 'open', match: '/', match_type: 'path_prefix' },
    { id: 'admin', match: '/admin', match_type: 'exact_path' },
    { id: 'api', match: '/api/', match_type: 'path_prefix' },
    { id: 'caps', match: '/Secret', match_type: 'path_prefix' },
  ].map(routeMatcher);
  it.each([
    ['another case', '/ADMIN'],
    ['a trailing slash', '/admin/'],
    ['path parameters', '/admin;x'],
    ['all three at once', '/Admin;x/'],
    ['a route spelled with capitals, reached in lower case', '/secret/x'],
  ])('refuses %s', (_why, path) => {
    const r = chooseRoute(guarded, 'app.example.com', path);
    expect(r.route?.id).toBe('open');
    expect(r.ambiguous).toEqual(expect.any(String));
  });
  it.each([
    ['the route as named', '/admin', 'admin'],
    ['a path of the broad route', '/Photos/A.png', 'open'],
    ['a trailing slash the route names', '/api/', 'api'],
    ['parameters within the route', '/api/x;jsessionid=1', 'api'],
  ])('serves %s', (_why, path, id) => {
    expect(chooseRoute(guarded, 'app.example.com', path)).toEqual({ route: expect.objectContaining({ id }) });
  });
});
