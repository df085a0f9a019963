// The engine's write transactions on PostgreSQL (hot-writes.ts): one client of the pool the
// driver adapter holds, BEGIN ... COMMIT under READ COMMITTED, every statement a named
// (server-side prepared) statement of fixed text (lists go as arrays), with the row locks
// of locks.ts. Dates go as ISO text into timestamp(3) columns, in UTC as Prisma writes them.
//
// The client is pipelined for the transaction (node-postgres's pipeline mode): a statement
// whose answer nothing waits for (BEGIN, the inserts, updates and deletes) is sent at once
// and not waited for; it travels with the next statement that is waited for, or with the
// COMMIT. The statements run in the order they were sent, as before, so locks are taken in
// the same order and every read sees the writes before it; what changes is only that a
// write's refusal (a taken unique key, a reference to a deleted row, a deadlock) is thrown by
// the next awaited statement or the commit instead of by the write's own call, and the
// transaction is rolled back all the same. A POST is two round trips (BEGIN, the event
// subscriptions, the caller's hold and the INSERT; the COMMIT), was five.
import type { Pool, PoolClient, QueryConfig } from 'pg';
import { SELECT, type Raw, toRow } from './hot-pg.js';
import type { KeyRow, RefRow, WriteFailure, Writes, WriteStore } from './hot-writes.js';
import type { LockMode } from './locks.js';
import { listenWhileHeld } from './pg-pool.js';

const MODES: LockMode[] = ['KEY SHARE', 'SHARE', 'NO KEY UPDATE', 'UPDATE'];
const LOCKS = new Map(MODES.map((m) => [m, { name: `edgeform_w_lock_${m.replace(/ /g, '_').toLowerCase()}`, text: `${SELECT} WHERE "id" = ANY($1) ORDER BY "id" FOR ${m}` }]));
const HOLDS = new Map(MODES.map((m) => [m, { name: `edgeform_w_hold_${m.replace(/ /g, '_').toLowerCase()}`, text: `SELECT "id" FROM "Resource" WHERE "id" = ANY($1) ORDER BY "id" FOR ${m}` }]));

const iso = (d: Date) => d.toISOString();

/** The statements of one pipelined transaction on `client`: `q` waits for an answer, `send` does not. */
class Pipeline {
  /**
   * The first statement's failure. Once one fails, PostgreSQL refuses every later one of the
   * transaction as "aborted"; the first is the one that says why (a taken key, a deadlock).
   * Answers arrive, and their handlers run, in the order the statements were sent.
   */
  private failed: unknown;
  private readonly socket: { cork(): void; uncork(): void };
  private corked = false;
  constructor(private readonly client: PoolClient) {
    this.socket = (client as unknown as { connection: { stream: Pipeline['socket'] } }).connection.stream;
  }

  /** Sends a statement now; its failure is thrown by the next `q` or `commit`. */
  send(name: string | undefined, text: string, values?: unknown[]): void {
    void this.query({ name, text, values });
  }

  /** Sends a statement and returns its rows. */
  async q<R>(name: string, text: string, values: unknown[]): Promise<R[]> {
    try {
      return (await this.query({ name, text, values })).rows as R[];
    } catch (e) {
      throw this.failed ?? e;
    }
  }

  async commit(): Promise<void> {
    let done;
    try {
      done = await this.query({ text: 'COMMIT' });
    } catch (e) {
      throw this.failed ?? e;
    }
    // An aborted transaction answers COMMIT with ROLLBACK, not an error.
    if (this.failed) throw this.failed;
    if (done.command !== 'COMMIT') throw new Error(`the transaction was rolled back (${done.command})`);
  }

  /** Statements sent in one turn of the event loop leave in one write to the socket. */
  private query(config: QueryConfig) {
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(() => {
        this.corked = false;
        this.socket.uncork();
      });
    }
    const answer = this.client.query(config);
    answer.catch((e: unknown) => { this.failed ??= e; });
    return answer;
  }
}

function writes(p: Pipeline): Writes {
  const q = <R>(name: string, text: string, values: unknown[]) => p.q<R>(name, text, values);
  const send = (name: string, text: string, values: unknown[]) => p.send(name, text, values);
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
    async hold(ids, mode) {
      const unique = [...new Set(ids.filter(Boolean))];
      const hold = HOLDS.get(mode)!;
      return unique.length ? (await q<{ id: string }>(hold.name, hold.text, [unique])).map((r) => r.id) : [];
    },
    async lockChildren(parentIds) {
      if (parentIds.length) send('edgeform_w_lock_children', 'SELECT "id" FROM "Resource" WHERE "parentId" = ANY($1) ORDER BY "id" FOR UPDATE', [parentIds]);
    },
    async lockName(name) {
      send('edgeform_w_lock_name', 'SELECT pg_advisory_xact_lock(hashtext($1))::text AS "locked"', [name]);
    },
    async insert(r) {
      send('edgeform_w_insert', 'INSERT INTO "Resource" ("id", "kind", "parentId", "createdAt", "updatedAt", "data", "sealed") VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [r.id, r.kind, r.parentId, iso(r.createdAt), iso(r.updatedAt), JSON.stringify(r.data), r.sealed]);
    },
    async update(id, updatedAt, data, sealed) {
      send('edgeform_w_update', 'UPDATE "Resource" SET "updatedAt" = $1, "data" = $2, "sealed" = $3 WHERE "id" = $4', [iso(updatedAt), JSON.stringify(data), sealed, id]);
    },
    async remove(id) {
      send('edgeform_w_remove', 'DELETE FROM "Resource" WHERE "id" = $1', [id]);
    },
    async refsFrom(fromIds, path) {
      return fromIds.length ? q('edgeform_w_refs_from', 'SELECT "fromId", "toId" FROM "Reference" WHERE "path" = $1 AND "fromId" = ANY($2)', [path, fromIds]) : [];
    },
    async referrers(toIds) {
      return toIds.length ? q<RefRow>('edgeform_w_referrers', 'SELECT "fromId", "path", "toId", "onDelete", "heldId" FROM "Reference" WHERE "toId" = ANY($1)', [toIds]) : [];
    },
    async setRefs(fromId, refs, fresh) {
      if (!fresh) send('edgeform_w_refs_clear', 'DELETE FROM "Reference" WHERE "fromId" = $1', [fromId]);
      if (!refs.length) return;
      const col = <K extends keyof RefRow>(k: K) => refs.map((r) => r[k]);
      send('edgeform_w_refs_insert', 'INSERT INTO "Reference" ("fromId", "path", "toId", "onDelete", "heldId") SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])',
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
      if (!fresh) send('edgeform_w_keys_clear', 'DELETE FROM "UniqueKey" WHERE "resourceId" = $1', [resourceId]);
      if (!keys.length) return;
      send('edgeform_w_keys_insert', 'INSERT INTO "UniqueKey" ("scope", "value", "resourceId") SELECT k."scope", k."value", $3 FROM unnest($1::text[], $2::text[]) AS k("scope", "value")',
        [keys.map((k) => k.scope), keys.map((k) => k.value), resourceId]);
    },
    async keysEndingWith(scope, suffix, resourceId, take) {
      return q<KeyRow>('edgeform_w_keys_ending', 'SELECT "scope", "value", "resourceId" FROM "UniqueKey" WHERE "scope" = $1 AND right("value", length($2)) = $2 AND "resourceId" <> $3 LIMIT $4', [scope, suffix, resourceId, take]);
    },
    async insertToken(digest, resourceId) {
      send('edgeform_w_token', 'INSERT INTO "Token" ("digest", "resourceId") VALUES ($1, $2)', [digest, resourceId]);
    },
    async insertEvent(e) {
      const [row] = await q<{ seq: number }>('edgeform_w_event', 'INSERT INTO "Event" ("id", "type", "resourceId", "payload", "createdAt") VALUES ($1, $2, $3, $4, $5) RETURNING "seq"',
        [e.id, e.type, e.resourceId, JSON.stringify(e.payload), iso(e.createdAt)]);
      return row.seq;
    },
    async insertDeliveries(deliveries) {
      if (!deliveries.length) return;
      send('edgeform_w_deliveries', 'INSERT INTO "Delivery" ("destinationId", "eventSeq", "nextAttemptAt") SELECT * FROM unnest($1::text[], $2::int[], $3::timestamp(3)[])',
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
      // Its connection may die between two statements (a restart, pg_terminate_backend): the
      // next statement fails (503), and the process lives on.
      const unlisten = listenWhileHeld(client);
      // A connection that failed (ROLLBACK did not go through) is not handed to the next request.
      let broken: Error | undefined;
      const pipelined = client as PoolClient & { pipeline: boolean };
      pipelined.pipeline = true;
      try {
        const p = new Pipeline(client);
        p.send(undefined, 'BEGIN');
        try {
          const out = await fn(writes(p));
          await p.commit();
          return out;
        } catch (e) {
          // Answered after every statement sent before it: nothing of this transaction is in flight once it is.
          await client.query('ROLLBACK').catch((rollbackFailed: Error) => { broken = rollbackFailed; });
          throw e;
        }
      } finally {
        // The pool's other users (Prisma's adapter, the hot reads) get the client as they left it.
        pipelined.pipeline = false;
        unlisten();
        client.release(broken);
      }
    },
    failure(e) {
      return FAILURES[String((e as { code?: unknown })?.code ?? '')];
    },
  };
}
