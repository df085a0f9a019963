// Conventions that hold for every route the server has, walked from the route table, so
// a route added later is covered without a new line here: credentials and the version
// header are checked before anything else, ids with another collection's prefix are 400,
// ids that name nothing are 404, bodies are JSON objects of known fields under 1 MiB, and
// other methods on a known path are 405 with Allow.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalog } from '../../provider/catalog/index.js';
import '../../server/resources/register.js';
import { apiRoutes, type ApiRoute } from '../../server/resources/routes.js';
import { expectError, unknownId } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

const routes = apiRoutes();
const prefixOf = (kind: string) => catalog.find((k) => k.kind === kind)!.prefix;
const OTHER_PREFIX = 'zzz';

/** The path with every parameter filled: ids of the right kind that name nothing. */
function fill(route: ApiRoute, wrong?: string): string {
  return route.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    const kind = route.kind;
    let prefix: string | undefined;
    if (name === 'id' && kind) prefix = kind.prefix;
    else if (kind?.parent?.in === 'path' && name === kind.parent.field) prefix = prefixOf(kind.parent.kind);
    if (!prefix) return 'ip_policy_created.v0';
    return unknownId(name === wrong ? OTHER_PREFIX : prefix);
  });
}

const label = (r: ApiRoute) => `${r.method} ${r.path}`;
const bodyOf = (r: ApiRoute) => (r.method === 'GET' || r.method === 'DELETE' ? undefined : {});
const idParams = (r: ApiRoute) => [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).filter((n) => n === 'id' || n === r.kind?.parent?.field);

describe.each(routes.map((r) => [label(r), r] as const))('%s', (_name, route) => {
  it('without a token: 401 with WWW-Authenticate', async () => {
    const r = await s.request(route.method, fill(route), bodyOf(route), { token: null });
    expectError(r, 401, 'ERR_SERVICE_201');
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('with a token no key has: 401', async () => {
    const r = await s.request(route.method, fill(route), bodyOf(route), { token: 'x'.repeat(43) });
    expectError(r, 401, 'ERR_SERVICE_202');
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('without Service-Version: 400 ERR_SERVICE_218; with another value: 400 ERR_SERVICE_217', async () => {
    expectError(await s.request(route.method, fill(route), bodyOf(route), { version: null }), 400, 'ERR_SERVICE_218');
    expectError(await s.request(route.method, fill(route), bodyOf(route), { version: '3' }), 400, 'ERR_SERVICE_217');
  });

  it.each(idParams(route))('an id of another collection in {%s}: 400 naming it', async (param) => {
    const r = await s.request(route.method, fill(route, param), bodyOf(route));
    const body = expectError(r, 400, 'ERR_SERVICE_105');
    expect(body.details.field).toBe(param);
  });

  it('an unknown query parameter: 400 naming it', async () => {
    const r = await s.request(route.method, `${fill(route)}?zz_unknown=1`, bodyOf(route));
    expect(expectError(r, 400, 'ERR_SERVICE_104').details.field).toBe('zz_unknown');
  });

  if (route.query.includes('limit')) {
    it.each(['0', '101', 'x', '-5'])('limit=%s: 400', async (limit) => {
      expect(expectError(await s.get(`${fill(route)}?limit=${limit}`), 400, 'ERR_SERVICE_104').details.field).toBe('limit');
    });

    it('a before_id of another collection: 400', async () => {
      expect(expectError(await s.get(`${fill(route)}?before_id=${unknownId(OTHER_PREFIX)}`), 400, 'ERR_SERVICE_104').details.field).toBe('before_id');
    });
  }

  if (route.request) {
    it('an unknown body field: 400 naming it and listing the supported fields', async () => {
      const r = await s.request(route.method, fill(route), { zz_unknown: 1 });
      const body = expectError(r, 400, 'ERR_SERVICE_102');
      expect(body.details.field).toBe('zz_unknown');
      expect(Array.isArray(body.details.supported_fields)).toBe(true);
      expect(body.msg).toContain('supported fields');
    });

    it('a body that is not JSON, or not a JSON object: 400', async () => {
      expectError(await s.request(route.method, fill(route), undefined, { raw: 'a=1', contentType: 'application/x-www-form-urlencoded' }), 400, 'ERR_SERVICE_101');
      expectError(await s.request(route.method, fill(route), undefined, { raw: '[{}]' }), 400, 'ERR_SERVICE_100');
      expectError(await s.request(route.method, fill(route), undefined, { raw: '{"a":' }), 400, 'ERR_SERVICE_100');
    });

    it('a body over 1 MiB: 413', async () => {
      expectError(await s.request(route.method, fill(route), { description: 'x'.repeat(1024 * 1024) }), 413, 'ERR_SERVICE_330');
    });
  }

  // Writes whose body must be valid first (module PUT, create under a parent) may answer 400 before 404.
  const lookup = idParams(route).length > 0 && (route.method !== 'PUT' && !(route.method === 'POST' && route.status === 201));
  if (lookup) {
    it('an id that names nothing: 404', async () => {
      const r = await s.request(route.method, fill(route), bodyOf(route));
      expectError(r, 404);
    });
  }
});

describe('methods a path does not have', () => {
  const byPath = new Map<string, ApiRoute[]>();
  for (const r of routes) byPath.set(r.path, [...(byPath.get(r.path) ?? []), r]);
  const cases = [...byPath].flatMap(([path, rs]) =>
    ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].filter((m) => !rs.some((r) => r.method === m)).map((m) => ({ path, method: m, rs })),
  );

  it.each(cases.map((c) => [`${c.method} ${c.path}`, c] as const))('%s: 405 with Allow', async (_name, { method, rs }) => {
    const r = await s.request(method, fill(rs[0]), ['GET', 'DELETE', 'OPTIONS'].includes(method) ? undefined : {});
    expectError(r, 405, 'ERR_SERVICE_310');
    expect(r.headers.get('allow')?.split(', ').sort()).toEqual(rs.map((x) => x.method).sort());
  });
});
