// The server on PostgreSQL: a throwaway cluster (scripts/pg-cluster.mjs), the same API as
// on SQLite, byte-wise id order, uniqueness races, several instances on one database,
// restart persistence, and health reporting when the database goes away.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { expectError } from '../helpers/api.js';
import { startTestServer, type Reply, type TestServer } from '../helpers/server.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the PostgreSQL suite: initdb is not on the PATH ***\n');

describe.skipIf(!available)('PostgreSQL', () => {
  let pg: { url(db: string): string; createDatabase(name: string): Promise<string>; stop(): void };
  let stopped = false;
  let s: TestServer;
  let url: string;

  beforeAll(async () => {
    pg = await startPostgres();
    // A database whose default collation is not byte order ('a' sorts before 'B'), as most
    // production databases are: ids must still sort byte-wise (their columns are COLLATE "C").
    const { default: Pg } = await import('pg');
    const admin = new Pg.Client({ connectionString: pg.url('postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE "edgeform" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`);
    await admin.end();
    url = pg.url('edgeform');
    s = await startTestServer({ databaseUrl: url });
  });
  afterAll(async () => {
    await s?.close().catch(() => {});
    if (!stopped) pg?.stop();
  });

  it('runs on PostgreSQL, in a database with a linguistic collation', async () => {
    expect(s.server.db.provider).toBe('postgresql');
    expect(s.server.db.migrated.length).toBeGreaterThan(0);
    const [{ linguistic }] = await s.server.db.prisma.$queryRawUnsafe<{ linguistic: boolean }[]>(`SELECT 'a' < 'B' AS linguistic`);
    expect(linguistic).toBe(true);
  });

  it('CRUD of IP policies and rules', async () => {
    const p = await s.post('/ip_policies', { description: 'pg' });
    expect(p.status).toBe(201);
    const rule = await s.post('/ip_policy_rules', { ip_policy_id: p.body.id, cidr: '2001:db8::/32', action: 'deny' });
    expect(rule.status).toBe(201);
    expect((await s.get(`/ip_policy_rules/${rule.body.id}`)).body).toEqual(rule.body);
    expect((await s.patch(`/ip_policies/${p.body.id}`, { metadata: 'm' })).body.metadata).toBe('m');
    expect((await s.del(`/ip_policies/${p.body.id}`)).status).toBe(204);
    expectError(await s.get(`/ip_policy_rules/${rule.body.id}`), 404);
  });

  it('a duplicate CIDR in one policy is 409, also when 50 requests race for it', async () => {
    const p = (await s.post('/ip_policies', {})).body;
    await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.0.0.0/8', action: 'allow' });
    expectError(await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.0.0.0/8', action: 'deny' }), 409, 'ERR_SERVICE_320');
    const replies = await Promise.all(Array.from({ length: 50 }, () => s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '172.16.0.0/12', action: 'allow' })));
    expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of replies.filter((x) => x.status !== 201)) expectError(r, 409, 'ERR_SERVICE_320');
  });

  it('50 concurrent creates all succeed with distinct ids', async () => {
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => s.post('/bot_users', { name: `pg${i}` })));
    for (const r of replies) expect(r.status, r.text).toBe(201);
    expect(new Set(replies.map((r) => r.body.id)).size).toBe(50);
  });

  it('pages newest first (ids sort byte-wise, whatever the database locale)', async () => {
    const created: string[] = [];
    for (let i = 0; i < 250; i++) created.push((await s.post('/credentials', { description: `c${i}` })).body.id);
    const seen: string[] = [];
    for (let next: string | null = '/credentials?limit=100'; next; ) {
      const r: Reply = await s.get(next);
      seen.push(...r.body.credentials.map((c: { id: string }) => c.id));
      next = r.body.next_page_uri;
    }
    expect(seen).toEqual([...created].reverse());
    // The same ids in the database's own collation come out in another order: the test can fail.
    const linguistic = await s.server.db.prisma.$queryRawUnsafe<{ id: string }[]>(`SELECT id FROM "Resource" WHERE kind = 'Credential' ORDER BY id COLLATE "default" DESC`);
    expect(linguistic.map((r) => r.id)).not.toEqual(seen);
  });

  it('delivers events to a log destination', async () => {
    const d = (await s.post('/event_destinations', { target: { log: {} } })).body;
    await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [d.id] });
    const p = (await s.post('/ip_policies', {})).body;
    const events = (await s.get(`/event_destinations/${d.id}/events`)).body.events;
    expect(events.map((e: { object: { id: string } }) => e.object.id)).toEqual([p.id]);
  });

  it('several instances share one database; only one bootstraps it', async () => {
    const fresh = await pg.createDatabase('shared');
    // Instances on one database share one secret key (docs/api.md, "The secret key").
    const secretKey = randomBytes(32).toString('hex');
    const [a, b] = await Promise.all([startTestServer({ databaseUrl: fresh, secretKey }), startTestServer({ databaseUrl: fresh, secretKey })]);
    try {
      expect([a.server.bootstrap.created, b.server.bootstrap.created].filter(Boolean)).toHaveLength(1);
      expect(await a.server.db.prisma.resource.count({ where: { kind: 'User' } })).toBe(1);
      const p = await a.post('/ip_policies', { description: 'from a' });
      expect((await b.get(`/ip_policies/${p.body.id}`)).body).toEqual({ ...p.body, uri: p.body.uri.replace(a.url, b.url) });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a restart keeps every resource and token', async () => {
    const key = (await s.post('/api_keys', { description: 'pg key' })).body;
    const before = (await s.get('/credentials?limit=100')).body;
    await s.restart();
    expect(s.server.bootstrap.created).toBe(false);
    expect(s.server.db.migrated).toEqual([]);
    expect((await s.get('/credentials?limit=100')).body).toEqual(before);
    expect((await s.get(`/api_keys/${key.id}`, { token: key.token })).body.description).toBe('pg key');
  });

  it('when the database goes away: /healthz is 503, and so is the API, revealing nothing of the cause', async () => {
    pg.stop();
    stopped = true;
    const health = await s.get('/healthz', { token: null, version: null });
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'unavailable', database: 'unreachable' });
    const r = await s.get('/ip_policies');
    expectError(r, 503, 'ERR_SERVICE_503');
    expect(r.headers.get('retry-after')).toBe('5');
    expect(r.text).not.toMatch(/ECONNREFUSED|postgres|SELECT|prisma|127\.0\.0\.1|at \w+ \(/i);
  });
});
