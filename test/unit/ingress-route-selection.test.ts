// Route selection (server/ingress/http/select-route.ts): a table of cases with a reason each.
import { describe, expect, it } from 'vitest';
import { normalizePath, routeMatcher, selectRoute } from '../../server/ingress/http/select-route.js';

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
  ])('%s', (_why, raw, want) => {
    expect(normalizePath(raw)).toBe(want);
  });
});
