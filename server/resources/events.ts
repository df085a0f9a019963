// Event subscriptions and destinations: each source's own uri, and the events a
// destination received (a `log` destination's only output).
import { eventDestination, eventSubscription } from '../../provider/catalog/events.js';
import { eventBody, isLogTarget } from '../events/outbox.js';
import { ApiError } from '../http/errors.js';
import { envelope, LIST_QUERY, pageOf } from '../http/paging.js';
import { behaviour } from './behaviours.js';
import { getResource } from './engine.js';
import { extraRoute } from './routes.js';

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
    const { limit, beforeId } = pageOf(req.query, 'ev');
    const destination = await getResource(ctx, eventDestination, req.params.id);
    // Event ids sort by time like every id, so a cursor that names no event still has a place.
    const before = beforeId ? await ctx.db.read.event.findFirst({ where: { id: { gte: beforeId } }, orderBy: { id: 'asc' } }) : undefined;
    const rows = await ctx.db.read.delivery.findMany({
      // A log destination lists its events at once, whether or not the worker has logged them yet.
      where: { destinationId: req.params.id, ...(isLogTarget(destination) ? {} : { deliveredAt: { not: null } }), ...(before ? { eventSeq: { lt: before.seq } } : {}) },
      orderBy: { eventSeq: 'desc' },
      take: limit + 1,
    });
    const events = await ctx.db.read.event.findMany({ where: { seq: { in: rows.slice(0, limit).map((r) => r.eventSeq) } }, orderBy: { seq: 'desc' } });
    const items = events.map(eventBody);
    return envelope('events', items, `${ctx.publicUrl}${eventDestination.path}/${req.params.id}/events`, rows.length > limit, events.at(-1)?.id, limit);
  },
});
