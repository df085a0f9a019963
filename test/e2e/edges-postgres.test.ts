// Edges, routes and backends on PostgreSQL (a throwaway cluster): routes carrying every
// module read back exactly, races for one route match and one hostport, the cycle check,
// an atomic failure and the cascade from an edge to its routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { kindOf } from '../../provider/catalog/index.js';
import { expectError, unknownId } from '../helpers/api.js';
import { createRefs, freshHostport, moduleSamples } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the edges-on-PostgreSQL suite: initdb is not on the PATH ***\n');

type Doc = Record<string, any>;
const routeKind = kindOf('HTTPSEdgeRoute');
const AUTH = ['oauth', 'oidc', 'saml'];

describe.skipIf(!available)('edges on PostgreSQL', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let s: TestServer;
  beforeAll(async () => {
    pg = await startPostgres();
    s = await startTestServer({ databaseUrl: await pg.createDatabase('edges') });
  });
  afterAll(async () => {
    await s?.close().catch(() => {});
    pg?.stop();
  });

  const create = async (path: string, body: Doc = {}) => {
    const r = await s.post(path, body);
    expect(r.status, r.text).toBe(201);
    return r.body as Doc;
  };

  it('routes carrying every module read back exactly as written, inside their edge, oldest first', async () => {
    const samples = moduleSamples(routeKind, await createRefs(s), s.url);
    const edge = await create('/edges/https', { hostports: [freshHostport()] });
    const created: Doc[] = [];
    for (let i = 0; i < 6; i++) {
      const auth = AUTH[i % 3];
      const modules = Object.keys(samples).filter((m) => !AUTH.includes(m) || m === auth);
      const route = await create(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: `/pg${i}`, ...Object.fromEntries(modules.map((m) => [m, samples[m].full.input])) });
      for (const m of modules) expect(route[m], m).toEqual(samples[m].full.read);
      created.push(route);
    }
    expect((await s.get(`/edges/https/${edge.id}`)).body.routes).toEqual(created);
  });

  it('twenty requests racing for one match, or one hostport across edge kinds: one wins, the rest are 409', async () => {
    const edge = await create('/edges/https', {});
    const routes = await Promise.all(Array.from({ length: 20 }, () => s.post(`/edges/https/${edge.id}/routes`, { match_type: 'exact_path', match: '/race' })));
    expect(routes.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of routes.filter((x) => x.status !== 201)) expectError(r, 409, 'ERR_SERVICE_320');
    const hp = freshHostport();
    const paths = ['/edges/https', '/edges/tcp', '/edges/tls'];
    const edges = await Promise.all(Array.from({ length: 21 }, (_, i) => s.post(paths[i % 3], { hostports: [hp] })));
    expect(edges.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of edges.filter((x) => x.status !== 201)) expectError(r, 409, 'ERR_SERVICE_320');
  });

  it('refuses a weighted backend cycle', async () => {
    const a = await create('/backends/weighted');
    const b = await create('/backends/weighted', { backends: { [a.id]: 1 } });
    const r = expectError(await s.patch(`/backends/weighted/${a.id}`, { backends: { [b.id]: 1 } }), 400, 'ERR_SERVICE_103');
    expect(r.msg).toContain(`${a.id} -> ${b.id} -> ${a.id}`);
  });

  it('a failing route create stores nothing; deleting the edge deletes its routes and frees their backend', async () => {
    const edge = await create('/edges/https', {});
    const backend = await create('/backends/http_response');
    expectError(await s.post(`/edges/https/${edge.id}/routes`, { match_type: 'exact_path', match: '/', backend: { backend_id: backend.id }, ip_restriction: { ip_policy_ids: [unknownId('ipp')] } }), 400);
    expect((await s.get(`/edges/https/${edge.id}`)).body.routes).toEqual([]);
    const route = await create(`/edges/https/${edge.id}/routes`, { match_type: 'exact_path', match: '/', backend: { backend_id: backend.id } });
    expectError(await s.del(`/backends/http_response/${backend.id}`), 409, 'ERR_SERVICE_321');
    expect((await s.del(`/edges/https/${edge.id}`)).status).toBe(204);
    expectError(await s.get(`/edges/https/${edge.id}/routes/${route.id}`), 404);
    expect((await s.del(`/backends/http_response/${backend.id}`)).status).toBe(204);
  });
});
