// Event retention: events every destination has received, older than --event-retention, are
// pruned with their delivery rows; an event any destination still waits for is kept however
// old; the server prunes on its own timer. Both databases.
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../server/config.js';
import { parseRetention, pruneDeliveredEvents } from '../../server/events/retention.js';
import { DATABASES, serverOn } from '../helpers/databases.js';
import { until } from '../helpers/wait.js';

describe('--event-retention', () => {
  it('takes <n>s, m, h or d, or 0; defaults to 72h; anything else is refused naming the setting', () => {
    expect(parseRetention('x', '90s')).toBe(90_000);
    expect(parseRetention('x', '7d')).toBe(7 * 86_400_000);
    expect(parseRetention('x', '0')).toBe(0);
    expect(resolveConfig({}, {}).eventRetentionMs).toBe(72 * 3_600_000);
    expect(resolveConfig({ eventRetention: '30m' }, { EDGEFORM_EVENT_RETENTION: '1h' }).eventRetentionMs).toBe(30 * 60_000);
    expect(() => resolveConfig({}, { EDGEFORM_EVENT_RETENTION: '3 days' })).toThrow(/--event-retention \/ EDGEFORM_EVENT_RETENTION takes a duration such as 72h/);
    expect(() => parseRetention('x', '0s')).toThrow(/from 1s to 3650d/);
  });
});

describe.each(DATABASES)('event retention on $db', ({ db, skip }) => {
  it.skipIf(skip)('delivered events older than the retention are pruned with their deliveries; pending ones are kept; the server prunes on its own', async () => {
    const { s, close } = await serverOn(db, 'retention', { eventRetentionMs: 2000 });
    try {
      const prisma = s.server.db.prisma;
      const log = (await s.post('/event_destinations', { target: { log: {} } })).body;
      // Nothing listens on port 9: deliveries there stay pending, retried with backoff.
      const dead = (await s.post('/event_destinations', { target: { http: { url: 'http://127.0.0.1:9/hook' } } })).body;
      expect((await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [log.id] })).status).toBe(201);
      expect((await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_updated.v0' }], destination_ids: [log.id, dead.id] })).status).toBe(201);
      const policy = (await s.post('/ip_policies', {})).body;
      for (let i = 0; i < 3; i++) expect((await s.post('/ip_policies', {})).status).toBe(201);
      expect((await s.patch(`/ip_policies/${policy.id}`, { description: 'held back' })).status).toBe(200);
      const updated = await prisma.event.findFirstOrThrow({ where: { type: 'ip_policy_updated.v0' } });
      await until(async () => (await prisma.delivery.count({ where: { destinationId: log.id, deliveredAt: null } })) === 0, 20_000, () => 'the log destination never received its events');

      // Within the retention nothing goes; past it the delivered go, the one the dead destination waits for stays.
      expect(await pruneDeliveredEvents(s.server.db, 60_000)).toBe(0);
      const later = Date.now() + 120_000;
      // (The server's own 2 s timer may have taken some of them first.)
      expect(await pruneDeliveredEvents(s.server.db, 60_000, later)).toBeLessThanOrEqual(4);
      expect((await prisma.event.findMany({ select: { seq: true } })).map((e) => e.seq)).toEqual([updated.seq]);
      expect(await prisma.delivery.count({ where: { eventSeq: updated.seq } })).toBe(2);
      expect(await prisma.delivery.count({ where: { eventSeq: { not: updated.seq } } })).toBe(0);
      // However old: a pending delivery keeps its event.
      expect(await pruneDeliveredEvents(s.server.db, 60_000, Date.now() + 365 * 86_400_000)).toBe(0);

      // The server's own timer (retention 2 s, a pass every second) prunes new events once delivered and old enough.
      const fresh = (await s.post('/ip_policies', {})).body;
      const event = await prisma.event.findFirstOrThrow({ where: { resourceId: fresh.id } });
      await until(async () => (await prisma.event.count({ where: { seq: event.seq } })) === 0, 30_000, () => 'the server never pruned the delivered event');
      expect(await prisma.event.count({ where: { seq: updated.seq } })).toBe(1);
      // Pruned events leave the log destination's listing.
      const listed = await s.get(`/event_destinations/${log.id}/events`);
      expect(listed.status).toBe(200);
      expect(listed.body.events.map((e: { id: string }) => e.id)).toEqual([updated.id]);
    } finally {
      await close();
    }
  }, 120_000);
});
