// The engine's write transactions on PostgreSQL (hot-writes.ts): one client of the pool the
// driver adapter holds, BEGIN ... COMMIT under READ COMMITTED, every statement a named
// (server-side prepared) statement of fixed text (lists go as arrays), with the row locks
// of locks.ts. Dates go as ISO text into timestamp(3) columns, in UTC as Prisma writes them.
import type { Pool, PoolClient } from 'pg';
import { SELECT, type Raw, toRow } from './hot-pg.js';
import type { KeyRow, RefRow, WriteFailure, Writes, WriteStore } from './hot-writes.js';
import type { LockMode } from './locks.js';

const MODES: LockMode[] = ['KEY SHARE', 'SHARE', 'NO KEY UPDATE', 'UPDATE'];
const LOCKS = new Map(MODES.map((m) => [m, { name: `edgeform_w_lock_${m.replace(/ /g, '_').toLowerCase()}`, text: `${SELECT} WHERE "id" = ANY($1) ORDER BY "id" FOR ${m}` }]));

const iso = (d: Date) => d.toISOString();

function writes(client: PoolClient): Writes {
  const q = async <R>(name: string, text: string, values: unknown[]) => (await client.query({ name, text, values })).rows as R[];
  const rows = async (name: string, text: string, values: unknown[]) => (await q<Raw>(name, text, values)).map(toRow);
  return {
    async resource(id) {
      const [row] = await rows('edgeform_w_one', `${SELECT} WHERE "id" = $1`, [id]);
      return row;
    },
    async resources(ids) {
      return ids.length ? rows('edgeform_w_ids', `${SELECT} WHERE "id" = ANY($1) ORDER BY "id"`, [[...new Set(ids)]]) : [];
    },
    async children(kind, parentIds) {
      return parentIds.length ? rows('edgeform_w_children', `${SELECT} WHERE "kind" = $1 AND "parentId" = ANY($2) ORDER BY "id"`, [kind, parentIds]) : [];
    },
    async ofKind(kind) {
      return rows('edgeform_w_kind', `${SELECT} WHERE "kind" = $1 ORDER BY "id"`, [kind]);
    },
    async childrenOfParent(parentId) {
      return rows('edgeform_w_parent', `${SELECT} WHERE "parentId" = $1 ORDER BY "id" DESC`, [parentId]);
    },
    async lock(ids, mode) {
      const unique = [...new Set(ids.filter(Boolean))];
      const lock = LOCKS.get(mode)!;
      return unique.length ? rows(lock.name, lock.text, [unique]) : [];
    },
    async lockChildren(parentIds) {
      if (parentIds.length) await q('edgeform_w_lock_children', 'SELECT "id" FROM "Resource" WHERE "parentId" = ANY($1) ORDER BY "id" FOR UPDATE', [parentIds]);
    },
    async lockName(name) {
      await q('edgeform_w_lock_name', 'SELECT pg_advisory_xact_lock(hashtext($1))::text AS "locked"', [name]);
    },
    async insert(r) {
      await q('edgeform_w_insert', 'INSERT INTO "Resource" ("id", "kind", "parentId", "createdAt", "updatedAt", "data", "sealed") VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [r.id, r.kind, r.parentId, iso(r.createdAt), iso(r.updatedAt), JSON.stringify(r.data), r.sealed]);
    },
    async update(id, updatedAt, data, sealed) {
      await q('edgeform_w_update', 'UPDATE "Resource" SET "updatedAt" = $1, "data" = $2, "sealed" = $3 WHERE "id" = $4', [iso(updatedAt), JSON.stringify(data), sealed, id]);
    },
    async remove(id) {
      await q('edgeform_w_remove', 'DELETE FROM "Resource" WHERE "id" = $1', [id]);
    },
    async refsFrom(fromIds, path) {
      return fromIds.length ? q('edgeform_w_refs_from', 'SELECT "fromId", "toId" FROM "Reference" WHERE "path" = $1 AND "fromId" = ANY($2)', [path, fromIds]) : [];
    },
    async referrers(toIds) {
      return toIds.length ? q<RefRow>('edgeform_w_referrers', 'SELECT "fromId", "path", "toId", "onDelete", "heldId" FROM "Reference" WHERE "toId" = ANY($1)', [toIds]) : [];
    },
    async setRefs(fromId, refs, fresh) {
      if (!fresh) await q('edgeform_w_refs_clear', 'DELETE FROM "Reference" WHERE "fromId" = $1', [fromId]);
      if (!refs.length) return;
      const col = <K extends keyof RefRow>(k: K) => refs.map((r) => r[k]);
      await q('edgeform_w_refs_insert', 'INSERT INTO "Reference" ("fromId", "path", "toId", "onDelete", "heldId") SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])',
        [col('fromId'), col('path'), col('toId'), col('onDelete'), col('heldId')]);
    },
    async countReferrers(toId, path, fromKind) {
      const [row] = await q<{ n: number }>('edgeform_w_count_referrers', 'SELECT count(*)::int AS "n" FROM "Reference" AS r JOIN "Resource" AS f ON f."id" = r."fromId" WHERE r."toId" = $1 AND r."path" = $2 AND f."kind" = $3', [toId, path, fromKind]);
      return row.n;
    },
    async takenKeys(keys, resourceId) {
      if (!keys.length) return [];
      return q<KeyRow>('edgeform_w_taken_keys',
        'SELECT u."scope", u."value", u."resourceId" FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k("scope", "value", "n") JOIN "UniqueKey" AS u ON u."scope" = k."scope" AND u."value" = k."value" WHERE u."resourceId" <> $3 ORDER BY k."n"',
        [keys.map((k) => k.scope), keys.map((k) => k.value), resourceId]);
    },
    async setKeys(resourceId, keys, fresh) {
      if (!fresh) await q('edgeform_w_keys_clear', 'DELETE FROM "UniqueKey" WHERE "resourceId" = $1', [resourceId]);
      if (!keys.length) return;
      await q('edgeform_w_keys_insert', 'INSERT INTO "UniqueKey" ("scope", "value", "resourceId") SELECT k."scope", k."value", $3 FROM unnest($1::text[], $2::text[]) AS k("scope", "value")',
        [keys.map((k) => k.scope), keys.map((k) => k.value), resourceId]);
    },
    async keysEndingWith(scope, suffix, resourceId, take) {
      return q<KeyRow>('edgeform_w_keys_ending', 'SELECT "scope", "value", "resourceId" FROM "UniqueKey" WHERE "scope" = $1 AND right("value", length($2)) = $2 AND "resourceId" <> $3 LIMIT $4', [scope, suffix, resourceId, take]);
    },
    async insertToken(digest, resourceId) {
      await q('edgeform_w_token', 'INSERT INTO "Token" ("digest", "resourceId") VALUES ($1, $2)', [digest, resourceId]);
    },
    async insertEvent(e) {
      const [row] = await q<{ seq: number }>('edgeform_w_event', 'INSERT INTO "Event" ("id", "type", "resourceId", "payload", "createdAt") VALUES ($1, $2, $3, $4, $5) RETURNING "seq"',
        [e.id, e.type, e.resourceId, JSON.stringify(e.payload), iso(e.createdAt)]);
      return row.seq;
    },
    async insertDeliveries(deliveries) {
      if (!deliveries.length) return;
      await q('edgeform_w_deliveries', 'INSERT INTO "Delivery" ("destinationId", "eventSeq", "nextAttemptAt") SELECT * FROM unnest($1::text[], $2::int[], $3::timestamp(3)[])',
        [deliveries.map((d) => d.destinationId), deliveries.map((d) => d.eventSeq), deliveries.map((d) => iso(d.nextAttemptAt))]);
    },
  };
}

/** SQLSTATEs: a deadlock victim or serialization failure is run again; constraint refusals are the engine's 409s and 400s. */
const FAILURES: Record<string, WriteFailure> = { '40P01': 'conflict', '40001': 'conflict', '23505': 'unique', '23503': 'reference' };

export function hotWritesPg(pool: Pool): WriteStore {
  return {
    async transaction(fn) {
      const client = await pool.connect();
      // A connection that failed (BEGIN or ROLLBACK did not go through) is not handed to the next request.
      let broken: Error | undefined;
      try {
        await client.query('BEGIN').catch((e: Error) => { broken = e; throw e; });
        try {
          const out = await fn(writes(client));
          await client.query('COMMIT');
          return out;
        } catch (e) {
          await client.query('ROLLBACK').catch((rollbackFailed: Error) => { broken = rollbackFailed; });
          throw e;
        }
      } finally {
        client.release(broken);
      }
    },
    failure(e) {
      return FAILURES[String((e as { code?: unknown })?.code ?? '')];
    },
  };
}
