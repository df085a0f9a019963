// Tunnels bound one at a time, as the version-2 protocol binds them (edgeform's own agent names
// all of its tunnels in its hello; live-rows.ts writes those with the session). The same rows,
// events and endpoint keys: one session at a time holds a hostname (409 ERR_SERVICE_320), and
// a holder no instance vouches for any more is swept first.
import { endpoint, tunnel } from '../../../provider/catalog/tunnels.js';
import { emit, rfc3339 } from '../../events/outbox.js';
import { ApiError } from '../../http/errors.js';
import type { ServerContext } from '../../resources/context.js';
import { prismaRows } from '../../store/prisma-rows.js';
import { deleteSessions, ENDPOINT_SCOPE, endpointKey, shaped, TX, type TunnelRow } from '../live-rows.js';

/** Writes one tunnel (and its endpoint) of a live session; throws 409 when its hostname is held by another live session. */
export async function addTunnel(ctx: ServerContext, sessionId: string, region: string, t: TunnelRow, staleBefore: () => Date): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await writeTunnel(ctx, sessionId, region, t);
    } catch (e) {
      if ((e as { code?: string }).code !== 'P2002' || attempt >= 2 || !t.endpoint) throw e;
      const key = endpointKey(t.endpoint.publicUrl);
      const held = await ctx.db.prisma.uniqueKey.findUnique({ where: { scope_value: { scope: ENDPOINT_SCOPE, value: key } }, select: { resource: { select: { parentId: true } } } });
      const holderTunnel = held?.resource.parentId;
      const holderSession = holderTunnel ? (await ctx.db.prisma.resource.findUnique({ where: { id: holderTunnel }, select: { parentId: true } }))?.parentId : undefined;
      const lease = holderSession ? await ctx.db.prisma.agentLease.findUnique({ where: { sessionId: holderSession } }) : null;
      if (holderSession && (!lease || lease.seenAt < staleBefore())) {
        await deleteSessions(ctx, [holderSession]);
        continue;
      }
      throw new ApiError('ERR_SERVICE_320', `the hostname ${key} is already served by tunnel ${holderTunnel ?? '(unknown)'} of tunnel session ${holderSession ?? '(unknown)'}; one tunnel session at a time holds a hostname, and it is free again once that session ends`);
    }
  }
}

async function writeTunnel(ctx: ServerContext, sessionId: string, region: string, t: TunnelRow) {
  await ctx.db.prisma.$transaction(async (tx) => {
    const at = new Date();
    const started = rfc3339(at);
    await tx.resource.create({
      data: {
        id: t.id, kind: tunnel.kind, parentId: sessionId, createdAt: at, updatedAt: at,
        data: { body: {}, computed: { started_at: started, metadata: t.metadata, region, forwards_to: t.forwardsTo, labels: t.labels, proto: t.proto, public_url: t.endpoint?.publicUrl, endpoint_id: t.endpoint?.id } },
      },
    });
    if (t.endpoint) {
      await tx.resource.create({ data: { id: t.endpoint.id, kind: endpoint.kind, parentId: t.id, createdAt: at, updatedAt: at, data: { body: {}, computed: { public_url: t.endpoint.publicUrl, proto: t.proto } } } });
      await tx.uniqueKey.create({ data: { scope: ENDPOINT_SCOPE, value: endpointKey(t.endpoint.publicUrl), resourceId: t.endpoint.id } });
    }
    const [doc] = await shaped(ctx, tx, tunnel, [await tx.resource.findUniqueOrThrow({ where: { id: t.id } })]);
    await emit(prismaRows(tx), tunnel, 'created', doc);
  }, TX);
  ctx.afterCommit?.();
}

/** Deletes tunnels (with their endpoints and keys), each with its deleted event. */
export async function removeTunnels(ctx: ServerContext, ids: string[]): Promise<void> {
  if (!ids.length) return;
  await ctx.db.prisma.$transaction(async (tx) => {
    const rows = await tx.resource.findMany({ where: { id: { in: ids }, kind: tunnel.kind } });
    if (!rows.length) return;
    const docs = await shaped(ctx, tx, tunnel, rows);
    await tx.resource.deleteMany({ where: { parentId: { in: rows.map((r) => r.id) }, kind: endpoint.kind } });
    await tx.resource.deleteMany({ where: { id: { in: rows.map((r) => r.id) } } });
    for (const d of docs) await emit(prismaRows(tx), tunnel, 'deleted', d);
  }, TX);
  ctx.afterCommit?.();
}
