// The engine's write transactions (server/store/hot-writes-sqlite.ts, hot-writes-pg.ts) on
// both databases: what they store reads back through Prisma exactly as Prisma's own writes
// did (dates, documents, references, keys, tokens, events and deliveries), a transaction
// that throws leaves nothing behind, and the database's refusals are classified for the
// engine's 409s and 400s.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPrismaRow, DATABASES, serverOn } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';

describe.each(DATABASES)('the engine writes on $db', ({ db, skip }) => {
  let server: Awaited<ReturnType<typeof serverOn>> | undefined;
  let s: TestServer;
  beforeAll(async () => {
    if (skip) return;
    server = await serverOn(db, 'writes');
    s = server.s;
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });

  it.skipIf(skip)('a created and patched row reads back through Prisma with the dates and document of the answer', async () => {
    const created = (await s.post('/ip_policies', { description: 'written', metadata: '{"a":1}' })).body;
    const row = await s.server.db.prisma.resource.findUnique({ where: { id: created.id } });
    expect(row).toMatchObject({ kind: 'IPPolicy', parentId: null, sealed: null, data: { body: { description: 'written', metadata: '{"a":1}' }, computed: {} } });
    expect(row!.createdAt.toISOString().replace(/\.\d{3}Z$/, 'Z')).toBe(created.created_at);
    expect(row!.updatedAt).toEqual(row!.createdAt);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await s.patch(`/ip_policies/${created.id}`, { description: 'rewritten' });
    const after = await s.server.db.prisma.resource.findUnique({ where: { id: created.id } });
    expect(after!.createdAt).toEqual(row!.createdAt);
    expect(after!.updatedAt.getTime()).toBeGreaterThan(row!.updatedAt.getTime());
    const hot = await s.server.db.hot.resource(created.id);
    expect(asPrismaRow(hot)).toEqual(after);
    expect(hot!.createdText).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|\+00:00)$/);
  });

  it.skipIf(skip)('references, unique keys and a parent are stored as rows, and a delete removes them with the resource', async () => {
    const policy = (await s.post('/ip_policies', {})).body;
    const rule = (await s.post('/ip_policy_rules', { ip_policy_id: policy.id, cidr: '198.51.100.0/24', action: 'allow' })).body;
    const edge = (await s.post('/edges/https', { hostports: ['writes.example.com:443'] })).body;
    const route = (await s.post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/w', ip_restriction: { ip_policy_ids: [policy.id] } })).body;
    const prisma = s.server.db.prisma;
    expect((await prisma.resource.findUnique({ where: { id: rule.id } }))!.parentId).toBe(policy.id);
    expect(await prisma.reference.findMany({ where: { fromId: route.id } })).toEqual([
      { fromId: route.id, path: 'ip_restriction.ip_policy_ids', toId: policy.id, onDelete: 'keep', heldId: null },
    ]);
    expect(await prisma.uniqueKey.findMany({ where: { resourceId: { in: [rule.id, edge.id, route.id] } }, orderBy: { resourceId: 'asc' } })).toHaveLength(3);
    expect((await s.del(`/edges/https/${edge.id}`)).status).toBe(204);
    expect(await prisma.resource.count({ where: { id: { in: [edge.id, route.id] } } })).toBe(0);
    expect(await prisma.reference.count({ where: { fromId: route.id } })).toBe(0);
    expect(await prisma.uniqueKey.count({ where: { resourceId: { in: [edge.id, route.id] } } })).toBe(0);
  });

  it.skipIf(skip)('a PATCH keeps references and keys it does not change, and replaces those it does', async () => {
    const prisma = s.server.db.prisma;
    const [a, b] = [(await s.post('/ip_policies', {})).body, (await s.post('/ip_policies', {})).body];
    const edge = (await s.post('/edges/https', { hostports: ['patch-a.example.com:443'] })).body;
    const route = (await s.post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/p', ip_restriction: { ip_policy_ids: [a.id] } })).body;
    const refs = () => prisma.reference.findMany({ where: { fromId: route.id }, select: { toId: true } });
    await s.patch(`/edges/https/${edge.id}/routes/${route.id}`, { description: 'only this' });
    expect(await refs()).toEqual([{ toId: a.id }]);
    await s.put(`/edges/https/${edge.id}/routes/${route.id}/ip_restriction`, { ip_policy_ids: [b.id] });
    expect(await refs()).toEqual([{ toId: b.id }]);
    await s.patch(`/edges/https/${edge.id}`, { description: 'same hostports' });
    expect((await s.post('/edges/https', { hostports: ['patch-a.example.com:443'] })).status).toBe(409);
    await s.patch(`/edges/https/${edge.id}`, { hostports: ['patch-b.example.com:443'] });
    expect((await s.post('/edges/https', { hostports: ['patch-a.example.com:443'] })).status).toBe(201);
    expect((await s.post('/edges/https', { hostports: ['patch-b.example.com:443'] })).status).toBe(409);
  });

  it.skipIf(skip)("an API key's token is stored, authenticates, and goes with the key", async () => {
    const key = (await s.post('/api_keys', { description: 'written token' })).body;
    expect(await s.server.db.prisma.token.count({ where: { resourceId: key.id } })).toBe(1);
    expect((await s.get('/ip_policies', { token: key.token })).status).toBe(200);
    expect((await s.del(`/api_keys/${key.id}`)).status).toBe(204);
    expect(await s.server.db.prisma.token.count({ where: { resourceId: key.id } })).toBe(0);
    expect((await s.get('/ip_policies', { token: key.token })).status).toBe(401);
  });

  it.skipIf(skip)('events and their deliveries are recorded in the transaction, and listed by a log destination', async () => {
    const destination = (await s.post('/event_destinations', { target: { log: {} } })).body;
    await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }, { type: 'ip_policy_deleted.v0' }], destination_ids: [destination.id] });
    const policy = (await s.post('/ip_policies', { description: 'evented' })).body;
    await s.del(`/ip_policies/${policy.id}`);
    const events = await s.server.db.prisma.event.findMany({ where: { resourceId: policy.id }, orderBy: { seq: 'asc' } });
    expect(events.map((e) => e.type)).toEqual(['ip_policy_created.v0', 'ip_policy_deleted.v0']);
    expect((events[0].payload as { object: unknown }).object).toEqual(policy);
    const deliveries = await s.server.db.prisma.delivery.findMany({ where: { eventSeq: { in: events.map((e) => e.seq) } }, orderBy: { eventSeq: 'asc' } });
    expect(deliveries.map((d) => [d.destinationId, d.eventSeq])).toEqual(events.map((e) => [destination.id, e.seq]));
    const listed = (await s.get(`/event_destinations/${destination.id}/events`)).body.events;
    expect(listed.map((e: { type: string; object: { id: string } }) => [e.type, e.object.id])).toEqual([['ip_policy_deleted.v0', policy.id], ['ip_policy_created.v0', policy.id]]);
  });

  it.skipIf(skip)("a subscription's own creation and changes are delivered by what it says once written (the subscriptions read early are read again)", async () => {
    const destination = (await s.post('/event_destinations', { target: { log: {} } })).body;
    const own = ['event_subscription_created.v0', 'event_subscription_updated.v0'];
    const sub = (await s.post('/event_subscriptions', { sources: own.map((type) => ({ type })), destination_ids: [destination.id] })).body;
    await s.patch(`/event_subscriptions/${sub.id}`, { description: 'delivered' });
    // The change that unsubscribes it from its own changes is judged by what it says after.
    await s.patch(`/event_subscriptions/${sub.id}`, { sources: [{ type: 'ip_policy_created.v0' }] });
    await s.patch(`/event_subscriptions/${sub.id}`, { description: 'not delivered' });
    const policy = (await s.post('/ip_policies', {})).body;
    const delivered = await s.server.db.prisma.delivery.findMany({ where: { destinationId: destination.id }, orderBy: { eventSeq: 'asc' } });
    const events = await s.server.db.prisma.event.findMany({ where: { seq: { in: delivered.map((d) => d.eventSeq) } }, orderBy: { seq: 'asc' } });
    expect(events.map((e) => [e.type, e.resourceId])).toEqual([[own[0], sub.id], [own[1], sub.id], ['ip_policy_created.v0', policy.id]]);
    expect((events[1].payload as { object: { description: string } }).object.description).toBe('delivered');
  });

  it.skipIf(skip)('a refused write is reported as itself by the statement after it, nothing of it lands, and the connections serve the next writes', async () => {
    const store = s.server.db.writes;
    const policy = (await s.post('/ip_policies', { description: 'first' })).body;
    const now = new Date();
    const row = (id: string) => ({ id, kind: 'IPPolicy', parentId: null, createdAt: now, updatedAt: now, data: { body: {}, computed: {} }, sealed: null });
    const refused = await store.transaction(async (w) => {
      await w.insert(row('ipp_notlanded00000000000000'));
      await w.insert(row(policy.id));
      await w.setKeys('ipp_notlanded00000000000000', [{ scope: 'test-refused', value: 'v' }]);
      await w.resource(policy.id);
      await w.update(policy.id, now, { body: { description: 'overwritten' }, computed: {} }, null);
    }).catch((e) => e);
    expect(store.failure(refused)).toBe('unique');
    expect(await s.server.db.prisma.resource.count({ where: { id: 'ipp_notlanded00000000000000' } })).toBe(0);
    expect(await s.server.db.prisma.uniqueKey.count({ where: { scope: 'test-refused' } })).toBe(0);
    expect((await s.get(`/ip_policies/${policy.id}`)).body.description).toBe('first');
    const statuses = await Promise.all(Array.from({ length: 12 }, (_, i) => s.patch(`/ip_policies/${policy.id}`, { metadata: `m${i}` }).then((r) => r.status)));
    expect(statuses).toEqual(Array(12).fill(200));
    expect(await s.server.db.prisma.resource.count({ where: { id: policy.id } })).toBe(1);
  });

  it.skipIf(skip)('hold returns, in id order, the ids of the rows that exist, each once', async () => {
    const [a, b] = [(await s.post('/ip_policies', {})).body.id, (await s.post('/ip_policies', {})).body.id];
    const held = await s.server.db.writes.transaction((w) => w.hold([b, 'ipp_missing', a, b, ''], 'KEY SHARE'));
    expect(held).toEqual([a, b].sort());
  });

  it.skipIf(skip)('a transaction that throws leaves nothing behind', async () => {
    const now = new Date();
    await expect(s.server.db.writes.transaction(async (w) => {
      await w.insert({ id: 'ipp_rolledback0000000000000', kind: 'IPPolicy', parentId: null, createdAt: now, updatedAt: now, data: { body: {}, computed: {} }, sealed: null });
      await w.setKeys('ipp_rolledback0000000000000', [{ scope: 'test', value: 'rolled back' }]);
      throw new Error('changed my mind');
    })).rejects.toThrow('changed my mind');
    expect(await s.server.db.prisma.resource.count({ where: { id: 'ipp_rolledback0000000000000' } })).toBe(0);
    expect(await s.server.db.prisma.uniqueKey.count({ where: { scope: 'test' } })).toBe(0);
  });

  it.skipIf(skip)("the database's refusals are classified: a taken key is 'unique', a missing target 'reference'", async () => {
    const store = s.server.db.writes;
    const policy = (await s.post('/ip_policies', {})).body;
    await store.transaction((w) => w.setKeys(policy.id, [{ scope: 'test-unique', value: 'v' }]));
    const other = (await s.post('/ip_policies', {})).body;
    const taken = await store.transaction((w) => w.setKeys(other.id, [{ scope: 'test-unique', value: 'v' }])).catch((e) => e);
    expect(store.failure(taken)).toBe('unique');
    const missing = await store.transaction((w) => w.setRefs(other.id, [{ fromId: other.id, path: 'x', toId: 'ipp_missing', onDelete: 'restrict', heldId: 'ipp_missing' }])).catch((e) => e);
    expect(store.failure(missing)).toBe('reference');
    expect(store.failure(new Error('not the database'))).toBeUndefined();
    expect(await store.transaction((w) => w.takenKeys([{ scope: 'test-unique', value: 'v' }], other.id))).toEqual([{ scope: 'test-unique', value: 'v', resourceId: policy.id }]);
  });

  it.skipIf(skip)("Prisma's own write transactions and the engine's take turns on one database", async () => {
    const prisma = s.server.db.prisma;
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2
      ? prisma.$transaction(async (tx) => { await tx.setting.create({ data: { key: `turns-${i}`, value: String(i) } }); })
      : s.post('/ip_policies', { description: `turns ${i}` }).then((r) => r.status))));
    expect(results.filter((r) => r === 201)).toHaveLength(5);
    expect(await prisma.setting.count({ where: { key: { startsWith: 'turns-' } } })).toBe(5);
  });
});
