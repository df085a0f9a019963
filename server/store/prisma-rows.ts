// The reads and event inserts of hot-writes.ts through one of Prisma's interactive
// transactions, for the writes that stay on Prisma (agents' sessions, server/gateway) and
// still shape read forms and record events like the engine.
import type { Tx } from './db.js';
import type { ResourceRow, TokenRows } from './hot-reads.js';
import type { EventWrites } from './hot-writes.js';

export function prismaRows(tx: Tx): EventWrites & TokenRows {
  return {
    async tokenHolder(digest) {
      return ((await tx.token.findUnique({ where: { digest }, include: { resource: true } }))?.resource ?? undefined) as ResourceRow | undefined;
    },
    async resource(id) {
      return ((await tx.resource.findUnique({ where: { id } })) ?? undefined) as ResourceRow | undefined;
    },
    async resources(ids) {
      return (await tx.resource.findMany({ where: { id: { in: ids } }, orderBy: { id: 'asc' } })) as ResourceRow[];
    },
    async children(kind, parentIds) {
      return (await tx.resource.findMany({ where: { kind, parentId: { in: parentIds } }, orderBy: { id: 'asc' } })) as ResourceRow[];
    },
    async ofKind(kind) {
      return (await tx.resource.findMany({ where: { kind }, orderBy: { id: 'asc' } })) as ResourceRow[];
    },
    async insertEvent(e) {
      const event = await tx.event.create({ data: { ...e, payload: e.payload as object } });
      return event.seq;
    },
    async insertDeliveries(rows) {
      await tx.delivery.createMany({ data: rows.map((r) => ({ ...r, deliveredAt: null })) });
    },
  };
}
