// Small behaviours of families that need no file of their own.
import { tunnelGroupBackend } from '../../provider/catalog/backends.js';
import { eventDestination, eventSubscription } from '../../provider/catalog/events.js';
import { tunnelSession } from '../../provider/catalog/tunnels.js';
import { ApiError } from '../http/errors.js';
import { envelope, LIST_QUERY, pageOf } from '../http/paging.js';
import { behaviour } from './behaviours.js';
import { getResource } from './engine.js';
import { extraRoute } from './routes.js';

// No agents connect yet, so no tunnel matches a backend's labels.
behaviour(tunnelGroupBackend.kind, { read: ({ out }) => { out.tunnels = []; } });

behaviour(eventSubscription.kind, {
  read: ({ out }) => {
    out.sources = (out.sources as { type: string }[]).map((s) => ({ type: s.type, uri: `${out.uri}/sources/${s.type}` }));
  },
});

extraRoute({
  method: 'GET',
  path: `${eventSubscription.path}/{id}/sources/{type}`,
  summary: 'Get one source of an event subscription',
  kind: eventSubscription,
  tag: eventSubscription.kind,
  status: 200,
  handle: async (ctx, req) => {
    const sub = await getResource(ctx, eventSubscription, req.params.id);
    const source = (sub.sources as { type: string; uri: string }[]).find((s) => s.type === req.params.type);
    if (!source) throw new ApiError('ERR_SERVICE_300', `event subscription ${req.params.id} has no source ${req.params.type}`, { id: req.params.id });
    return source;
  },
});

extraRoute({
  method: 'GET',
  path: `${eventDestination.path}/{id}/events`,
  summary: 'Events delivered to an event destination, newest first',
  kind: eventDestination,
  tag: eventDestination.kind,
  query: LIST_QUERY,
  status: 200,
  handle: async (ctx, req) => {
    await getResource(ctx, eventDestination, req.params.id);
    const { limit, beforeId } = pageOf(req.query, 'ev');
    const before = beforeId ? await ctx.db.prisma.event.findUnique({ where: { id: beforeId } }) : undefined;
    const rows = await ctx.db.prisma.delivery.findMany({
      where: { destinationId: req.params.id, deliveredAt: { not: null }, ...(before ? { eventSeq: { lt: before.seq } } : {}) },
      orderBy: { eventSeq: 'desc' },
      take: limit + 1,
    });
    const events = await ctx.db.prisma.event.findMany({ where: { seq: { in: rows.slice(0, limit).map((r) => r.eventSeq) } }, orderBy: { seq: 'desc' } });
    const items = events.map((e) => ({ id: e.id, ...(e.payload as object) }));
    return envelope('events', items, `${ctx.publicUrl}${eventDestination.path}/${req.params.id}/events`, rows.length > limit, events.at(-1)?.id, limit);
  },
});

// Agent commands: sessions exist only while an agent is online; none is, so each is 404.
for (const action of tunnelSession.spec.actions ?? []) {
  extraRoute({
    method: 'POST',
    path: `${tunnelSession.path}/{id}/${action}`,
    summary: `Tell the agent of a tunnel session to ${action}`,
    kind: tunnelSession,
    tag: tunnelSession.kind,
    status: 204,
    handle: async (ctx, req) => {
      await getResource(ctx, tunnelSession, req.params.id);
    },
  });
}
