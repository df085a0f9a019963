// Sessions, tunnels and endpoints as live rows: written when an agent's hello is accepted,
// deleted (with their events) when its connection ends, and swept when the instance that
// held the connection stops vouching for them (its lease goes stale). They are ordinary
// Resource rows, so the generic engine lists and reads them; a tunnel's parent is its
// session and an endpoint's its tunnel, so the database removes children with a session.
import { endpoint, tunnel, tunnelSession } from '../../provider/catalog/tunnels.js';
import type { KindEntry } from '../../provider/catalog/index.js';
import { emit, rfc3339 } from '../events/outbox.js';
import type { Doc } from '../resources/behaviours.js';
import type { Ctx, ServerContext, Tx } from '../resources/context.js';
import { present } from '../resources/engine.js';

export interface SessionRow {
  id: string;
  credentialId: string;
  ip: string;
  os: string;
  agentVersion: string;
  metadata: string;
  region: string;
  startedAt: Date;
}

export interface TunnelRow {
  id: string;
  name: string;
  metadata: string;
  forwardsTo: string;
  labels?: Record<string, string>;
  proto?: string;
  endpoint?: { id: string; publicUrl: string };
}

type Row = { id: string; kind: string; parentId: string | null; createdAt: Date; data: unknown };
const TX = { maxWait: 15_000, timeout: 30_000 };

const asCtx = (ctx: ServerContext) => ctx as Ctx;

const stored = (r: Row) => {
  const data = r.data as { body: Doc; computed: Doc };
  return { id: r.id, kind: r.kind, parentId: r.parentId, createdAt: r.createdAt, body: data.body, computed: data.computed, secretFields: {}, internal: {} };
};

async function shaped(ctx: ServerContext, tx: Tx, kind: KindEntry, rows: Row[]) {
  return present(asCtx(ctx), tx, kind, rows.map(stored));
}

/** Writes a session, its lease and its tunnels in one transaction, with their created events. */
export async function createSession(ctx: ServerContext, instanceId: string, s: SessionRow, tunnels: TunnelRow[]) {
  await ctx.db.prisma.$transaction(async (tx) => {
    const at = s.startedAt;
    const started = rfc3339(at);
    await tx.resource.create({
      data: {
        id: s.id, kind: tunnelSession.kind, createdAt: at, updatedAt: at,
        data: { body: {}, computed: { agent_version: s.agentVersion, credential_id: s.credentialId, ip: s.ip, metadata: s.metadata, os: s.os, region: s.region, started_at: started, transport: 'service/v2' } },
      },
    });
    await tx.agentLease.create({ data: { sessionId: s.id, instanceId, seenAt: new Date() } });
    for (const t of tunnels) {
      await tx.resource.create({
        data: {
          id: t.id, kind: tunnel.kind, parentId: s.id, createdAt: at, updatedAt: at,
          data: { body: {}, computed: { started_at: started, metadata: t.metadata, region: s.region, forwards_to: t.forwardsTo, labels: t.labels, proto: t.proto, public_url: t.endpoint?.publicUrl, endpoint_id: t.endpoint?.id } },
        },
      });
      if (t.endpoint) {
        await tx.resource.create({
          data: { id: t.endpoint.id, kind: endpoint.kind, parentId: t.id, createdAt: at, updatedAt: at, data: { body: {}, computed: { public_url: t.endpoint.publicUrl, proto: t.proto } } },
        });
      }
    }
    const [session] = await shaped(ctx, tx, tunnelSession, [await tx.resource.findUniqueOrThrow({ where: { id: s.id } })]);
    await emit(tx, tunnelSession, 'created', session);
    const rows = await tx.resource.findMany({ where: { parentId: s.id }, orderBy: { id: 'asc' } });
    for (const t of await shaped(ctx, tx, tunnel, rows)) await emit(tx, tunnel, 'created', t);
  }, TX);
  ctx.afterCommit?.();
}

/** Deletes sessions with their tunnels and endpoints, each with its deleted event (children first). */
export async function deleteSessions(ctx: ServerContext, ids: string[]) {
  if (!ids.length) return;
  await ctx.db.prisma.$transaction(async (tx) => {
    const sessions = await tx.resource.findMany({ where: { id: { in: ids }, kind: tunnelSession.kind } });
    if (!sessions.length) return;
    const tunnels = await tx.resource.findMany({ where: { parentId: { in: sessions.map((s) => s.id) }, kind: tunnel.kind } });
    const endpoints = await tx.resource.findMany({ where: { parentId: { in: tunnels.map((t) => t.id) }, kind: endpoint.kind } });
    const events: [KindEntry, Doc][] = [];
    for (const t of await shaped(ctx, tx, tunnel, tunnels)) events.push([tunnel, t]);
    for (const s of await shaped(ctx, tx, tunnelSession, sessions)) events.push([tunnelSession, s]);
    await tx.resource.deleteMany({ where: { id: { in: endpoints.map((e) => e.id) } } });
    await tx.resource.deleteMany({ where: { id: { in: tunnels.map((t) => t.id) } } });
    await tx.resource.deleteMany({ where: { id: { in: sessions.map((s) => s.id) } } });
    for (const [kind, doc] of events) await emit(tx, kind, 'deleted', doc);
  }, TX);
  ctx.afterCommit?.();
}

/** The instance vouches for the sessions it holds (one statement per heartbeat); returns how many leases it still had. */
export async function renewLeases(ctx: ServerContext, instanceId: string, held: string[]): Promise<number> {
  const r = await ctx.db.prisma.agentLease.updateMany({ where: { instanceId, sessionId: { in: held } }, data: { seenAt: new Date() } });
  return r.count;
}

/** Sessions whose instance stopped vouching for them before `staleBefore`. */
export async function staleSessions(ctx: ServerContext, staleBefore: Date): Promise<string[]> {
  const rows = await ctx.db.prisma.agentLease.findMany({ where: { seenAt: { lt: staleBefore } }, select: { sessionId: true } });
  return rows.map((r) => r.sessionId);
}

/** The instance holding a session's connection, or undefined when it is not online. */
export async function holderOf(ctx: ServerContext, sessionId: string): Promise<string | undefined> {
  const lease = await ctx.db.prisma.agentLease.findUnique({ where: { sessionId } });
  return lease?.instanceId;
}

