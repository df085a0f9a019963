// Tunnels bound one at a time, as the version-2 protocol binds them (edgeform's own agent names
// all of its tunnels in its hello; live-rows.ts writes those with the session). The same rows,
// events and endpoint keys: one session at a time holds a hostname (409 ERR_SERVICE_320), and
// a holder no instance vouches for any more is swept first.
import { endpoint, tunnel, tunnelSession } from '../../../provider/catalog/tunnels.js';
import { emit, rfc3339 } from '../../events/outbox.js';
import { ApiError } from '../../http/errors.js';
import type { ServerContext } from '../../resources/context.js';
import { prismaRows } from '../../store/prisma-rows.js';
import { deleteSessions, ENDPOINT_SCOPE, endpointComputed, endpointKey, endpointKeyOf, holderOfKey, shaped, TX, type TunnelRow } from '../live-rows.js';

/** Writes one tunnel (and its endpoint) of a live session; throws 409 when its hostname is held by another live session. */
export async function addTunnel(ctx: ServerContext, sessionId: string, region: string, t: TunnelRow, staleBefore: () => Date): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await writeTunnel(ctx, sessionId, region, t);
    } catch (e) {
      if ((e as { code?: string }).code !== 'P2002' || attempt >= 2 || !t.endpoint) throw e;
      const key = endpointKey(t.endpoint.publicUrl);
      const held = await holderOfKey(ctx.db.prisma, key, t.endpoint.pooled);
      const holderTunnel = held?.resource.parentId;
      const holderSession = holderTunnel ? (await ctx.db.prisma.resource.findUnique({ where: { id: holderTunnel }, select: { parentId: true } }))?.parentId : undefined;
      const lease = holderSession ? await ctx.db.prisma.agentLease.findUnique({ where: { sessionId: holderSession } }) : null;
      if (holderSession && (!lease || lease.seenAt < staleBefore())) {
        await deleteSessions(ctx, [holderSession]);
        continue;
      }
      const pooling = t.endpoint.pooled ? 'it does not enable pooling' : 'this one does not enable pooling (pooling_enabled on both shares it)';
      throw new ApiError('ERR_SERVICE_320', `the hostname ${key} is already served by tunnel ${holderTunnel ?? '(unknown)'} of tunnel session ${holderSession ?? '(unknown)'}, and ${pooling}; one tunnel session at a time holds a hostname, and it is free again once that session ends`);
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
      // A pool member and an endpoint without pooling hold different keys: the one that would
      // share a name without both pooling fails here as the unique key would (addTunnel's 409).
      if (await holderOfKey(tx, endpointKey(t.endpoint.publicUrl), t.endpoint.pooled)) throw Object.assign(new Error('the endpoint key is held'), { code: 'P2002' });
      await tx.resource.create({ data: { id: t.endpoint.id, kind: endpoint.kind, parentId: t.id, createdAt: at, updatedAt: at, data: { body: {}, computed: endpointComputed(t) } } });
      await tx.uniqueKey.create({ data: { scope: ENDPOINT_SCOPE, value: endpointKeyOf(t.endpoint), resourceId: t.endpoint.id } });
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

/**
 * Deletes the sessions of `ids` this instance still holds (its lease). One another instance
 * took over (the agent resumed it there, resumeSession) is that instance's to delete.
 */
export async function deleteHeldSessions(ctx: ServerContext, instanceId: string, ids: string[]): Promise<void> {
  await deleteSessions(ctx, ids, instanceId);
}

/** Of the sessions `ids`, those whose lease another instance holds now (their agents resumed them there). */
export async function takenElsewhere(ctx: ServerContext, instanceId: string, ids: string[]): Promise<string[]> {
  if (!ids.length) return [];
  const rows = await ctx.db.prisma.agentLease.findMany({ where: { sessionId: { in: ids }, instanceId: { not: instanceId } }, select: { sessionId: true } });
  return rows.map((r) => r.sessionId);
}

/**
 * A session an agent resumes on an instance that does not hold it in memory (after a restart,
 * or on another instance): its row, if still there, is taken over (the lease moves here and its
 * tunnels are deleted, to be bound again by the agent with the same ids and URLs); otherwise it
 * is written again with its id. Returns false when no row was there and `create` must write it.
 */
export async function takeOverSession(ctx: ServerContext, instanceId: string, sessionId: string, credentialId: string): Promise<boolean> {
  const row = await ctx.db.prisma.resource.findUnique({ where: { id: sessionId }, select: { kind: true, data: true } });
  if (!row) return false;
  const computed = (row.data as { computed?: { credential_id?: string; transport?: string } }).computed ?? {};
  if (row.kind !== tunnelSession.kind || computed.credential_id !== credentialId || computed.transport !== 'service/v2') throw new ApiError('ERR_SERVICE_320', `the id ${sessionId} is held by another session`);
  await ctx.db.prisma.agentLease.upsert({ where: { sessionId }, create: { sessionId, instanceId, seenAt: new Date() }, update: { instanceId, seenAt: new Date() } });
  const tunnels = await ctx.db.prisma.resource.findMany({ where: { parentId: sessionId, kind: tunnel.kind }, select: { id: true } });
  await removeTunnels(ctx, tunnels.map((t) => t.id));
  return true;
}

export type EndReason = 'stopped' | 'restarted';

/** Records that the server ended the session on purpose (a resume cookie no longer brings it back), until `until`. */
export async function markEnded(ctx: ServerContext, sessionId: string, reason: EndReason, until: Date): Promise<void> {
  await ctx.db.prisma.agentSessionEnd.upsert({ where: { sessionId }, create: { sessionId, reason, until }, update: { reason, until } });
}

/** Why the server ended the session on purpose, if it did (and the record has not expired). */
export async function endedReason(ctx: ServerContext, sessionId: string): Promise<EndReason | undefined> {
  const row = await ctx.db.prisma.agentSessionEnd.findUnique({ where: { sessionId } });
  return row && row.until > new Date() ? (row.reason as EndReason) : undefined;
}

/** Forgets expired records. */
export async function pruneEnded(ctx: ServerContext): Promise<void> {
  await ctx.db.prisma.agentSessionEnd.deleteMany({ where: { until: { lt: new Date() } } });
}
