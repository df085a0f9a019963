// Concurrency and consistency (docs/api.md, "Concurrency and consistency"), on SQLite and on
// a PostgreSQL cluster the test starts, each with one server instance and with two on the
// same database: concurrent PATCHes and module PUTs of one resource lose nothing, a
// backend deleted while routes naming it are created leaves no route pointing at nothing,
// overlapping deletes give one 204 and 404s, unique values raced for give 409, and never a
// 500. Then: a read never sees a write that has not committed (a failure injected after
// the INSERT holds the transaction open, then rolls it back).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { expectError } from '../helpers/api.js';
import { startTestServer, type Reply, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;

/** Modules put on a route at once, each by its own request; every one must be there after. */
const MODULES: Record<string, Doc> = {
  compression: {},
  websocket_tcp_converter: {},
  circuit_breaker: { tripped_duration: 7 },
  request_headers: { add: { 'x-req': 'a' } },
  response_headers: { add: { 'x-res': 'b' } },
  user_agent_filter: { deny: ['^curl/'] },
  ip_restriction: { ip_policy_ids: [] },
  traffic_policy: { value: '{}' },
};

/** Sends each request to the next instance in turn, so two instances interleave. */
function roundRobin(servers: TestServer[]) {
  let next = 0;
  return () => servers[next++ % servers.length];
}

function noServerErrors(replies: Reply[]) {
  const failed = replies.filter((r) => r.status >= 500);
  expect(failed.map((r) => `${r.status} ${r.text}`)).toEqual([]);
}

/** The concurrent cases, against one instance or several on one database. */
function concurrentCases(servers: () => TestServer[]) {
  const pick = () => roundRobin(servers());
  const first = () => servers()[0];

  it('concurrent module PUTs and PATCHes of one route: every change is there at the end', async () => {
    const s = pick();
    const edge = (await first().post('/edges/https', { hostports: [`lost-${Date.now()}.example.com:443`] })).body;
    const routes = await Promise.all(Array.from({ length: 6 }, (_, i) => first().post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: `/r${i}` })));
    const writes: Promise<Reply>[] = [];
    for (const { body: route } of routes) {
      const at = `/edges/https/${edge.id}/routes/${route.id}`;
      for (const [name, body] of Object.entries(MODULES)) writes.push(s().put(`${at}/${name}`, body));
      writes.push(s().patch(at, { description: `d ${route.id}` }), s().patch(at, { metadata: `m ${route.id}` }));
    }
    const replies = await Promise.all(writes);
    noServerErrors(replies);
    for (const r of replies) expect(r.status, r.text).toBe(200);
    let lost = 0;
    for (const { body: route } of routes) {
      const now = (await first().get(`/edges/https/${edge.id}/routes/${route.id}`)).body;
      lost += Object.keys(MODULES).filter((m) => now[m] == null).length;
      lost += Number(now.description !== `d ${route.id}`) + Number(now.metadata !== `m ${route.id}`);
    }
    expect(lost).toBe(0);
  });

  it('backends deleted while routes naming them are created: no route is left pointing at a missing backend', async () => {
    const s = pick();
    const edge = (await first().post('/edges/https', { hostports: [`dangling-${Date.now()}.example.com:443`] })).body;
    const backends = await Promise.all(Array.from({ length: 6 }, () => first().post('/backends/http_response', {})));
    const creates: Promise<Reply>[] = [];
    const deletes: Promise<Reply>[] = [];
    backends.forEach(({ body: backend }, b) => {
      for (let i = 0; i < 8; i++) {
        creates.push(s().post(`/edges/https/${edge.id}/routes`, { match_type: 'exact_path', match: `/b${b}/r${i}`, backend: { backend_id: backend.id } }));
        if (i === 3) deletes.push(s().del(`/backends/http_response/${backend.id}`));
      }
    });
    const made = await Promise.all(creates);
    const deleted = await Promise.all(deletes);
    noServerErrors([...made, ...deleted]);
    for (const r of made) if (r.status !== 201) expectError(r, 400, 'ERR_SERVICE_107');
    for (const r of deleted) if (r.status !== 204) expectError(r, 409, 'ERR_SERVICE_321');
    const routes = (await first().get(`/edges/https/${edge.id}`)).body.routes as Doc[];
    expect(routes.length).toBe(made.filter((r) => r.status === 201).length);
    const dangling: string[] = [];
    for (const route of routes) {
      const target = await first().get(`/backends/http_response/${route.backend.backend.id}`);
      if (target.status !== 200) dangling.push(route.id);
    }
    expect(dangling).toEqual([]);
    // What could be deleted was: each backend is gone unless a route still names it.
    for (const [b, r] of deleted.entries()) {
      const named = routes.some((route) => route.backend.backend.id === backends[b].body.id);
      expect(r.status).toBe(named ? 409 : 204);
    }
  });

  it('overlapping deletes of one resource: one 204, the rest 404', async () => {
    const s = pick();
    const policies = await Promise.all(Array.from({ length: 8 }, () => first().post('/ip_policies', {})));
    await Promise.all(policies.map((p) => first().post('/ip_policy_rules', { ip_policy_id: p.body.id, cidr: '10.0.0.0/8', action: 'allow' })));
    const replies = await Promise.all(policies.map((p) => Promise.all(Array.from({ length: 4 }, () => s().del(`/ip_policies/${p.body.id}`)))));
    noServerErrors(replies.flat());
    for (const group of replies) {
      expect(group.filter((r) => r.status === 204)).toHaveLength(1);
      for (const r of group.filter((x) => x.status !== 204)) expectError(r, 404, 'ERR_SERVICE_300');
    }
  });

  it('weighted backends made to point at each other at once: no cycle is stored', async () => {
    const s = pick();
    const pairs = await Promise.all(Array.from({ length: 6 }, async () => [
      (await first().post('/backends/weighted', { backends: {} })).body,
      (await first().post('/backends/weighted', { backends: {} })).body,
    ]));
    const replies = await Promise.all(pairs.map(([x, y]) => Promise.all([
      s().patch(`/backends/weighted/${x.id}`, { backends: { [y.id]: 1 } }),
      s().patch(`/backends/weighted/${y.id}`, { backends: { [x.id]: 1 } }),
    ])));
    noServerErrors(replies.flat());
    for (const pair of replies) {
      expect(pair.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of pair.filter((x) => x.status !== 200)) expect(expectError(r, 400, 'ERR_SERVICE_103').msg).toMatch(/would make a cycle/);
    }
  });

  it('unique values raced for (hostports, CIDRs, route matches): one 201, the rest 409', async () => {
    const s = pick();
    const host = `race-${Date.now()}.example.com:443`;
    const edges = await Promise.all(Array.from({ length: 12 }, () => s().post('/edges/https', { hostports: [host] })));
    const policy = (await first().post('/ip_policies', {})).body;
    const rules = await Promise.all(Array.from({ length: 12 }, () => s().post('/ip_policy_rules', { ip_policy_id: policy.id, cidr: '192.0.2.0/24', action: 'deny' })));
    const edge = edges.find((r) => r.status === 201)!.body;
    const routes = await Promise.all(Array.from({ length: 12 }, () => s().post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/same' })));
    for (const group of [edges, rules, routes]) {
      noServerErrors(group);
      expect(group.filter((r) => r.status === 201)).toHaveLength(1);
      for (const r of group.filter((x) => x.status !== 201)) expectError(r, 409, 'ERR_SERVICE_320');
    }
  });
}

/** References are enforced by the database itself, not only by the server's checks. */
function databaseReferenceCases(servers: () => TestServer[]) {
  it('the database refuses to delete a backend a route names; a "keep" reference (an IP policy) may dangle', async () => {
    const [s] = servers();
    const edge = (await s.post('/edges/https', { hostports: [`held-${Date.now()}.example.com:443`] })).body;
    const backend = (await s.post('/backends/http_response', {})).body;
    const policy = (await s.post('/ip_policies', {})).body;
    const route = (await s.post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backend.id }, ip_restriction: { ip_policy_ids: [policy.id] } })).body;
    // Past the server's own check, straight to the database: the foreign key refuses.
    const prisma = s.server.db.prisma;
    await expect(prisma.resource.delete({ where: { id: backend.id } })).rejects.toMatchObject({ code: 'P2003' });
    await expect(prisma.reference.create({ data: { fromId: route.id, path: 'backend.backend_id', toId: 'htrsp_missing', onDelete: 'restrict', heldId: 'htrsp_missing' } })).rejects.toMatchObject({ code: 'P2003' });
    expect((await s.get(`/backends/http_response/${backend.id}`)).status).toBe(200);
    expect((await s.del(`/ip_policies/${policy.id}`)).status).toBe(204);
    expect((await s.get(`/edges/https/${edge.id}/routes/${route.id}`)).body.ip_restriction.ip_policies.map((p: Doc) => p.id)).toEqual([policy.id]);
  });
}

/** Deactivating a bot waits for the writes its keys have under way (PostgreSQL: the row lock). */
function callerCases(servers: () => TestServer[]) {
  it("a bot deactivated while its key's write is open: the deactivation waits until that write ended", async () => {
    const [s] = servers();
    const bot = (await s.post('/bot_users', { name: `held-${Date.now()}` })).body;
    const key = (await s.post('/api_keys', { owner_id: bot.id })).body;
    const ended: string[] = [];
    process.env.EDGEFORM_TEST_FAIL_AFTER_INSERT = 'ip_policy:1500';
    try {
      const write = s.post('/ip_policies', {}, { token: key.token }).finally(() => ended.push('write'));
      // Until the bot's create is held open after its INSERT (bounded: 100 looks). Not merely
      // inside its transaction: between BEGIN and the key's hold it is idle in transaction too.
      const open = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'idle in transaction' AND datname = current_database() AND query LIKE 'INSERT INTO "Resource"%'`;
      for (let i = 0; i < 100 && !ended.length; i++) {
        const [{ n }] = await s.server.db.prisma.$queryRawUnsafe<{ n: number }[]>(open);
        if (n > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(ended).toEqual([]);
      const deactivate = s.patch(`/bot_users/${bot.id}`, { active: false }).finally(() => ended.push('deactivate'));
      // The deactivation waits on the write's hold of the bot: seen waiting for a lock while
      // neither has answered (bounded: 100 looks). Once the write's transaction ends, both
      // answers race, so the order they arrive in says nothing; the wait does.
      const waiting = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`;
      let seenWaiting = false;
      for (let i = 0; i < 100 && !ended.length && !seenWaiting; i++) {
        const [{ n }] = await s.server.db.prisma.$queryRawUnsafe<{ n: number }[]>(waiting);
        seenWaiting = n > 0;
        if (!seenWaiting) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(seenWaiting).toBe(true);
      expect(ended).toEqual([]);
      const [w, d] = await Promise.all([write, deactivate]);
      expectError(w, 500, 'ERR_SERVICE_500');
      expect(d.status, d.text).toBe(200);
    } finally {
      delete process.env.EDGEFORM_TEST_FAIL_AFTER_INSERT;
    }
    expectError(await s.post('/ip_policies', {}, { token: key.token }), 401, 'ERR_SERVICE_203');
  });
}

/** Item 9: a create held open after its INSERT and then failed is never visible to a read. */
function uncommittedCases(servers: () => TestServer[]) {
  it('a read during a write transaction that then fails never sees its row', async () => {
    const [s] = servers();
    const before = (await s.get('/ip_policies?limit=100')).body.ip_policies.map((p: Doc) => p.id);
    process.env.EDGEFORM_TEST_FAIL_AFTER_INSERT = 'ip_policy:600';
    try {
      let done = false;
      const post = s.post('/ip_policies', { description: 'never committed' }).finally(() => { done = true; });
      const seen: string[] = [];
      let during = 0;
      // Bounded: at most 100 reads, and only while the failing create is open.
      for (let i = 0; i < 100 && !done; i++) {
        const [page, all] = await Promise.all([s.get('/ip_policies?limit=1'), s.get('/ip_policies?limit=100')]);
        expect(page.status, page.text).toBe(200);
        if (!done) during++;
        seen.push(...page.body.ip_policies.map((p: Doc) => p.id), ...all.body.ip_policies.map((p: Doc) => p.id));
      }
      const failed = await post;
      expectError(failed, 500, 'ERR_SERVICE_500');
      expect(during).toBeGreaterThan(0);
      expect(seen.filter((id) => !before.includes(id))).toEqual([]);
    } finally {
      delete process.env.EDGEFORM_TEST_FAIL_AFTER_INSERT;
    }
    // The rollback is complete: nothing new, and the next create works.
    expect((await s.get('/ip_policies?limit=100')).body.ip_policies.map((p: Doc) => p.id)).toEqual(before);
    expect((await s.post('/ip_policies', {})).status).toBe(201);
  });
}

describe('SQLite, one instance', () => {
  let s: TestServer;
  beforeAll(async () => { s = await startTestServer(); });
  afterAll(async () => { await s?.close(); });
  concurrentCases(() => [s]);
  databaseReferenceCases(() => [s]);
  uncommittedCases(() => [s]);
});

// Two servers on one SQLite file are refused at start (server/store/sqlite-lock.ts,
// test/e2e/sqlite-lock.test.ts); several instances share a database on PostgreSQL, below.

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the PostgreSQL consistency suite: initdb is not on the PATH ***\n');

describe.skipIf(!available)('PostgreSQL', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  beforeAll(async () => { pg = await startPostgres(); });
  afterAll(() => pg?.stop());

  describe('one instance', () => {
    let s: TestServer;
    beforeAll(async () => { s = await startTestServer({ databaseUrl: await pg.createDatabase('one') }); });
    afterAll(async () => { await s?.close(); });
    concurrentCases(() => [s]);
    databaseReferenceCases(() => [s]);
    uncommittedCases(() => [s]);
    callerCases(() => [s]);
  });

  describe('two instances on one database', () => {
    let a: TestServer;
    let b: TestServer;
    beforeAll(async () => {
      const url = await pg.createDatabase('two');
      a = await startTestServer({ databaseUrl: url });
      // The same data folder: instances on one database share one secret key.
      b = await startTestServer({ databaseUrl: url, dir: a.dir });
    });
    afterAll(async () => {
      await b?.close();
      await a?.close();
    });
    concurrentCases(() => [a, b]);
  });
});
