// The hot reads (server/store/hot-sqlite.ts, hot-pg.ts) return what Prisma returns for the
// same rows, on both databases; and SQLite keeps the planner's statistics, so a child
// lookup uses the parent index however many rows there are.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPrismaRow, DATABASES, pgAvailable, serverOn } from '../helpers/databases.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { childrenSql } from '../../server/store/hot-sqlite.js';
import { digestOf } from '../../server/http/tokens.js';

const available = pgAvailable;
if (!available) console.warn('\n*** SKIPPING the hot reads on PostgreSQL: initdb is not on the PATH ***\n');

describe.each(DATABASES)('hot reads on $db', ({ db, skip }) => {
  let server: Awaited<ReturnType<typeof serverOn>> | undefined;
  let s: TestServer;
  const policies: string[] = [];
  beforeAll(async () => {
    if (skip) return;
    server = await serverOn(db, 'hot');
    s = server.s;
    for (let i = 0; i < 5; i++) {
      const p = (await s.post('/ip_policies', { description: `hot ${i}`, metadata: `{"i":${i}}` })).body;
      for (let j = 0; j < i; j++) await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: `10.${i}.${j}.0/24`, action: j % 2 ? 'deny' : 'allow' });
      policies.push(p.id);
    }
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });

  it.skipIf(skip)('one row: the same fields, dates and document as Prisma reads; undefined for an unknown id', async () => {
    for (const id of policies) {
      expect(asPrismaRow(await s.server.db.hot.resource(id))).toEqual(await s.server.db.prisma.resource.findUnique({ where: { id } }));
    }
    expect(await s.server.db.hot.resource('ipp_unknown')).toBeUndefined();
  });

  it.skipIf(skip)('a page, newest first, and the page before an id', async () => {
    const prisma = s.server.db.prisma.resource;
    expect((await s.server.db.hot.page('IPPolicy', 3)).map(asPrismaRow)).toEqual(await prisma.findMany({ where: { kind: 'IPPolicy' }, orderBy: { id: 'desc' }, take: 3 }));
    const before = policies[3];
    expect((await s.server.db.hot.page('IPPolicy', 10, before)).map(asPrismaRow)).toEqual(await prisma.findMany({ where: { kind: 'IPPolicy', id: { lt: before } }, orderBy: { id: 'desc' }, take: 10 }));
  });

  it.skipIf(skip)('children of several parents, in id order', async () => {
    const rows = await s.server.db.hot.children('IPPolicyRule', policies);
    expect(rows.map(asPrismaRow)).toEqual(await s.server.db.prisma.resource.findMany({ where: { kind: 'IPPolicyRule', parentId: { in: policies } }, orderBy: { id: 'asc' } }));
    expect(rows).toHaveLength(10);
  });

  it.skipIf(skip)("a token's holder: the key's row as Prisma reads it through the token; undefined for an unknown digest", async () => {
    const key = (await s.post('/api_keys', { description: 'hot holder' })).body;
    const digest = digestOf(key.token);
    const viaPrisma = await s.server.db.prisma.token.findUnique({ where: { digest }, include: { resource: true } });
    expect(viaPrisma?.resource.id).toBe(key.id);
    expect(asPrismaRow(await s.server.db.hot.tokenHolder(digest))).toEqual(viaPrisma!.resource);
    expect(await s.server.db.hot.tokenHolder(digestOf(`${key.token}x`))).toBeUndefined();
    await s.del(`/api_keys/${key.id}`);
    expect(await s.server.db.hot.tokenHolder(digest)).toBeUndefined();
  });

  it.skipIf(skip)('GET and a list answer the same documents as the write that made them', async () => {
    const created = (await s.post('/ip_policies', { description: 'shape' })).body;
    await s.post('/ip_policy_rules', { ip_policy_id: created.id, cidr: '192.0.2.0/24', action: 'allow' });
    const patched = (await s.patch(`/ip_policies/${created.id}`, { metadata: 'm' })).body;
    expect((await s.get(`/ip_policies/${created.id}`)).body).toEqual(patched);
    expect((await s.get('/ip_policies?limit=1')).body.ip_policies).toEqual([patched]);
  });
});

describe('SQLite planner statistics', () => {
  let s: TestServer;
  beforeAll(async () => { s = await startTestServer(); });
  afterAll(async () => { await s?.close(); });

  it('are gathered at start, so a child lookup reads by the parent index rather than every row of its kind', async () => {
    const edge = (await s.post('/edges/https', { hostports: ['stats.example.com:443'] })).body;
    // Rows enough for the choice to matter: 100 edges of 2 routes each (written directly, only their keys matter here).
    const now = new Date();
    const row = (id: string, kind: string, parentId: string | null) => ({ id, kind, parentId, createdAt: now, updatedAt: now, data: { body: {}, computed: {} } });
    const ids = Array.from({ length: 100 }, (_, i) => `edghts_stats${String(i).padStart(4, '0')}`);
    await s.server.db.prisma.resource.createMany({ data: ids.map((id) => row(id, 'HTTPSEdge', null)) });
    await s.server.db.prisma.resource.createMany({ data: ids.flatMap((id, i) => [0, 1].map((j) => row(`rt_stats${i}x${j}`, 'HTTPSEdgeRoute', id))) });
    await s.restart();
    const stats = await s.server.db.prisma.$queryRawUnsafe<{ idx: string }[]>(`SELECT "idx" FROM "sqlite_stat1" WHERE "tbl" = 'Resource'`);
    expect(stats.map((r) => r.idx)).toContain('Resource_parentId_idx');
    const plan = await s.server.db.prisma.$queryRawUnsafe<{ detail: string }[]>(`EXPLAIN QUERY PLAN SELECT "id" FROM "Resource" WHERE "kind" = 'HTTPSEdgeRoute' AND "parentId" IN ('${edge.id}') ORDER BY "id"`);
    expect(plan.map((r) => r.detail).join(' | ')).toMatch(/Resource_parentId_idx/);
  });

  it("the hot reads' child lookup uses the parent index also before any statistics exist", async () => {
    const fresh = await startTestServer();
    try {
      // A new database: analyzed while empty, so the planner knows nothing of the rows to come.
      for (let i = 0; i < 30; i++) await fresh.post('/ip_policies', { description: `fresh ${i}` });
      const plan = await fresh.server.db.read.$queryRawUnsafe<{ detail: string }[]>(`EXPLAIN QUERY PLAN ${childrenSql(2)}`, 'IPPolicyRule', 'ipp_a', 'ipp_b');
      expect(plan.map((r) => r.detail).join(' | ')).toMatch(/Resource_parentId_idx/);
    } finally {
      await fresh.close();
    }
  });
});
