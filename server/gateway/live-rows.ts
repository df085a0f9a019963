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
import { prismaRows } from '../store/prisma-rows.js';

export interface SessionRow {
  id: string;
  credentialId: string;
  ip: string;
  os: string;
  agentVersion: string;
  metadata: string;
  region: string;
  startedAt: Date;
  /** SPEC's `transport`: `service/v2` (the default: edgeform's agent and the service's SDKs) or `ssh`. */
  transport?: 'service/v2' | 'ssh';
}

export interface TunnelRow {
  id: string;
  name: string;
  metadata: string;
  forwardsTo: string;
  labels?: Record<string, string>;
  proto?: string;
  /**
   * An endpoint's record: `pooled` (the agent enabled pooling: endpoints at one URL that all
   * pool share it, issue 36) and `internal` (a name under .internal, reached only through
   * forward-internal).
   */
  endpoint?: { id: string; publicUrl: string; pooled?: boolean; internal?: boolean };
}

type Row = { id: string; kind: string; parentId: string | null; createdAt: Date; data: unknown };
export const TX = { maxWait: 15_000, timeout: 30_000 };

const asCtx = (ctx: ServerContext) => ctx as Ctx;

const stored = (r: Row) => {
  const data = r.data as { body: Doc; computed: Doc };
  return { id: r.id, kind: r.kind, parentId: r.parentId, createdAt: r.createdAt, body: data.body, computed: data.computed, secretFields: {}, internal: {} };
};

/** An agent endpoint row's computed fields (its read form: server/resources/endpoints.ts). */
export function endpointComputed(t: TunnelRow) {
  const e = t.endpoint!;
  return { public_url: e.publicUrl, proto: t.proto, bindings: [e.internal ? 'internal' : 'public'], pooling_enabled: e.pooled === true };
}

export async function shaped(ctx: ServerContext, tx: Tx, kind: KindEntry, rows: Row[]) {
  return present(asCtx(ctx), prismaRows(tx), kind, rows.map(stored));
}

/** UniqueKey scope of agents' endpoints: one session at a time holds a hostname (or a TCP host:port). */
export const ENDPOINT_SCOPE = 'agent-endpoint';

/** What an endpoint holds: the hostname for http, https and tls (all routed by host), host:port for tcp. */
export function endpointKey(publicUrl: string): string {
  const url = new URL(publicUrl);
  return url.protocol === 'tcp:' ? url.host : url.hostname;
}

/**
 * A pool member's key: the endpoint's key, then its own id, so members at one URL hold keys of
 * their own; an endpoint without pooling holds the bare key, which a member refuses (and the
 * other way round: writers look for both, holderOfKey).
 */
export const POOL_MARK = '#pool:';
export function endpointKeyOf(e: { id: string; publicUrl: string; pooled?: boolean }): string {
  return e.pooled ? `${endpointKey(e.publicUrl)}${POOL_MARK}${e.id}` : endpointKey(e.publicUrl);
}

/**
 * Who holds `key` against a new endpoint: the endpoint without pooling at it, or (for one
 * without pooling) any pool member at it. Undefined when it is free to take.
 */
export async function holderOfKey(tx: Pick<Tx, 'uniqueKey'>, key: string, pooled: boolean | undefined) {
  const exact = await tx.uniqueKey.findUnique({ where: { scope_value: { scope: ENDPOINT_SCOPE, value: key } }, select: { resource: { select: { parentId: true } } } });
  if (exact || pooled) return exact ?? undefined;
  return (await tx.uniqueKey.findFirst({ where: { scope: ENDPOINT_SCOPE, value: { startsWith: `${key}${POOL_MARK}` } }, select: { resource: { select: { parentId: true } } } })) ?? undefined;
}

/**
 * UniqueKey scope of the session slots of credentials: a session of credential `c` holds one
 * slot `c/k` (k from 0), taken in the session's transaction and deleted with its row, so the
 * sessions one credential holds are counted on every instance alike, and two instances that
 * write sessions of one credential at once cannot both take its last slot.
 */
export const SLOT_SCOPE = 'agent-credential-session';
const slotPrefix = (credentialId: string) => `${credentialId}/`;

/** The credential holds `held` sessions, as many as it may (`limit`). */
export class SessionLimit extends Error {
  constructor(readonly held: number, readonly limit: number) { super(`the credential holds ${held} sessions, the limit is ${limit}`); }
}

/** How many sessions a credential holds, on every instance (stale ones until they are swept). */
export function sessionsOf(ctx: ServerContext, credentialId: string): Promise<number> {
  return ctx.db.prisma.uniqueKey.count({ where: { scope: SLOT_SCOPE, value: { startsWith: slotPrefix(credentialId) } } });
}

/** A tunnel left out because another tunnel's endpoint holds its hostname. */
export interface TakenEndpoint { tunnelId: string; key: string; holderTunnel?: string; holderSession?: string }

/** A unique constraint failed: another transaction (another instance) took a key first. */
const isUniqueViolation = (e: unknown) => (e as { code?: string }).code === 'P2002';

/** The holder of a key is a session no instance vouches for any more (its instance crashed): swept, then the write is run again. */
class StaleHolder extends Error {
  constructor(readonly sessionId: string) { super(`tunnel session ${sessionId} is stale`); }
}

/** The holder's lease is fresh but might be a crashed instance's last: the write waits until it would be stale, then looks again. */
class UntilStale extends Error {
  constructor(readonly at: number) { super('waiting for a lease to be renewed or go stale'); }
}

/**
 * Writes a session, its lease and its tunnels in one transaction, with their created events.
 * Each endpoint takes its key in the UniqueKey table (primary key scope + value), so two
 * sessions never hold one hostname, on whichever instances they connect: a tunnel whose
 * hostname is taken is left out and returned, the rest are written. A TCP endpoint whose
 * random port is taken draws another (`repick`). A concurrent writer that took a key after
 * the check fails this transaction on the constraint; it is then run again, and the check sees it.
 */
export async function createSession(ctx: ServerContext, instanceId: string, s: SessionRow, tunnels: TunnelRow[], opts: SessionWriteOptions): Promise<TakenEndpoint[]> {
  let waited = false;
  for (let attempt = 0; ; attempt++) {
    try {
      return await writeSession(ctx, instanceId, s, tunnels, { ...opts, mayWait: !waited });
    } catch (e) {
      if (e instanceof StaleHolder && attempt < 4) await deleteSessions(ctx, [e.sessionId]);
      else if (e instanceof UntilStale) {
        waited = true;
        await new Promise((r) => setTimeout(r, Math.max(0, e.at - Date.now())));
      } else if (!isUniqueViolation(e) || attempt >= 4) throw e;
    }
  }
}

export interface SessionWriteOptions {
  /** Another address for a TCP endpoint whose random port is taken. */
  repick: (t: TunnelRow) => string;
  /** A session whose lease was last renewed before this is stale: its hostnames are free. */
  staleBefore: () => Date;
  /** How long a lease stays fresh without renewal (ms). */
  staleAfterMs: number;
  /** Sessions one credential may hold at once; 0 for no limit. Past it the write throws SessionLimit. */
  maxPerCredential: number;
}

async function writeSession(ctx: ServerContext, instanceId: string, s: SessionRow, tunnels: TunnelRow[], opts: SessionWriteOptions & { mayWait: boolean }): Promise<TakenEndpoint[]> {
  const taken: TakenEndpoint[] = [];
  await ctx.db.prisma.$transaction(async (tx) => {
    let slot: string | undefined;
    if (opts.maxPerCredential > 0) {
      const prefix = slotPrefix(s.credentialId);
      const held = await tx.uniqueKey.findMany({ where: { scope: SLOT_SCOPE, value: { startsWith: prefix } }, select: { value: true } });
      if (held.length >= opts.maxPerCredential) throw new SessionLimit(held.length, opts.maxPerCredential);
      const used = new Set(held.map((h) => h.value));
      let k = 0;
      while (used.has(`${prefix}${k}`)) k++;
      slot = `${prefix}${k}`;
    }
    const placed: TunnelRow[] = [];
    // Who holds a key: a tunnel placed earlier in this session (not written yet), or a stored endpoint.
    const holderOf = async (key: string, pooled?: boolean) => {
      const here = placed.find((p) => p.endpoint && endpointKey(p.endpoint.publicUrl) === key && !(pooled && p.endpoint.pooled));
      if (here) return { holderTunnel: here.id, holderSession: s.id };
      const row = await holderOfKey(tx, key, pooled);
      if (!row) return undefined;
      const holderTunnel = row.resource.parentId ?? undefined;
      const holderSession = holderTunnel ? (await tx.resource.findUnique({ where: { id: holderTunnel }, select: { parentId: true } }))?.parentId ?? undefined : undefined;
      const lease = holderSession ? await tx.agentLease.findUnique({ where: { sessionId: holderSession } }) : null;
      if (holderSession && (!lease || lease.seenAt < opts.staleBefore())) throw new StaleHolder(holderSession);
      // Once per session write: the holder may be the previous session of this very agent,
      // left by an instance that crashed a moment ago; if its lease is not renewed by the
      // time it would be stale, it is swept and the agent gets its hostname back.
      if (lease && opts.mayWait && lease.instanceId !== instanceId) throw new UntilStale(lease.seenAt.getTime() + opts.staleAfterMs + 50);
      return { holderTunnel, holderSession };
    };
    for (const t of tunnels) {
      if (!t.endpoint) { placed.push(t); continue; }
      let key = endpointKey(t.endpoint.publicUrl);
      let holder = await holderOf(key, t.endpoint.pooled);
      for (let i = 0; i < 20 && holder && t.proto === 'tcp' && !t.endpoint.internal; i++) {
        t.endpoint.publicUrl = opts.repick(t);
        key = endpointKey(t.endpoint.publicUrl);
        holder = await holderOf(key, t.endpoint.pooled);
      }
      if (holder) taken.push({ tunnelId: t.id, key, ...holder });
      else placed.push(t);
    }
    tunnels = placed;
    const at = s.startedAt;
    const started = rfc3339(at);
    await tx.resource.create({
      data: {
        id: s.id, kind: tunnelSession.kind, createdAt: at, updatedAt: at,
        data: { body: {}, computed: { agent_version: s.agentVersion, credential_id: s.credentialId, ip: s.ip, metadata: s.metadata, os: s.os, region: s.region, started_at: started, transport: s.transport ?? 'service/v2' } },
      },
    });
    await tx.agentLease.create({ data: { sessionId: s.id, instanceId, seenAt: new Date() } });
    // Taken by another writer meanwhile: the unique constraint fails this transaction, and
    // createSession runs it again, which then sees that slot taken.
    if (slot) await tx.uniqueKey.create({ data: { scope: SLOT_SCOPE, value: slot, resourceId: s.id } });
    for (const t of tunnels) {
      await tx.resource.create({
        data: {
          id: t.id, kind: tunnel.kind, parentId: s.id, createdAt: at, updatedAt: at,
          data: { body: {}, computed: { started_at: started, metadata: t.metadata, region: s.region, forwards_to: t.forwardsTo, labels: t.labels, proto: t.proto, public_url: t.endpoint?.publicUrl, endpoint_id: t.endpoint?.id } },
        },
      });
      if (t.endpoint) {
        await tx.resource.create({
          data: { id: t.endpoint.id, kind: endpoint.kind, parentId: t.id, createdAt: at, updatedAt: at, data: { body: {}, computed: endpointComputed(t) } },
        });
        // Deleted with the endpoint row (cascade): the hostname is free once the session goes.
        await tx.uniqueKey.create({ data: { scope: ENDPOINT_SCOPE, value: endpointKeyOf(t.endpoint), resourceId: t.endpoint.id } });
      }
    }
    const [session] = await shaped(ctx, tx, tunnelSession, [await tx.resource.findUniqueOrThrow({ where: { id: s.id } })]);
    await emit(prismaRows(tx), tunnelSession, 'created', session);
    const rows = await tx.resource.findMany({ where: { parentId: s.id }, orderBy: { id: 'asc' } });
    for (const t of await shaped(ctx, tx, tunnel, rows)) await emit(prismaRows(tx), tunnel, 'created', t);
  }, TX);
  // Sessions, tunnels and endpoints are not in the ingress's routing table: nothing to apply there.
  ctx.afterCommit?.({ deliveries: true, ids: [] });
  return taken;
}

/**
 * Deletes sessions with their tunnels and endpoints, each with its deleted event (children first).
 * With `heldBy`, only those whose lease that instance holds (a session another instance took
 * over, gateway/v2, is left to it).
 */
export async function deleteSessions(ctx: ServerContext, ids: string[], heldBy?: string) {
  if (!ids.length) return;
  await ctx.db.prisma.$transaction(async (tx) => {
    const sessions = await tx.resource.findMany({ where: { id: { in: ids }, kind: tunnelSession.kind, ...(heldBy ? { leases: { some: { instanceId: heldBy } } } : {}) } });
    if (!sessions.length) return;
    const tunnels = await tx.resource.findMany({ where: { parentId: { in: sessions.map((s) => s.id) }, kind: tunnel.kind } });
    const endpoints = await tx.resource.findMany({ where: { parentId: { in: tunnels.map((t) => t.id) }, kind: endpoint.kind } });
    const events: [KindEntry, Doc][] = [];
    for (const t of await shaped(ctx, tx, tunnel, tunnels)) events.push([tunnel, t]);
    for (const s of await shaped(ctx, tx, tunnelSession, sessions)) events.push([tunnelSession, s]);
    await tx.resource.deleteMany({ where: { id: { in: endpoints.map((e) => e.id) } } });
    await tx.resource.deleteMany({ where: { id: { in: tunnels.map((t) => t.id) } } });
    await tx.resource.deleteMany({ where: { id: { in: sessions.map((s) => s.id) } } });
    for (const [kind, doc] of events) await emit(prismaRows(tx), kind, 'deleted', doc);
  }, TX);
  // Sessions, tunnels and endpoints are not in the ingress's routing table: nothing to apply there.
  ctx.afterCommit?.({ deliveries: true, ids: [] });
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

