// The statements of the engine's write transactions (create, PATCH, module PUT/DELETE and
// DELETE of every kind), run in one transaction on the handle the driver adapter already
// holds instead of through Prisma's interactive transaction, which cost a round trip
// through its query engine per statement (bench/README.md, "Writes"). One small module per
// database implements this: hot-writes-sqlite.ts (one better-sqlite3 transaction on the
// writer connection, in turn with Prisma's writes), hot-writes-pg.ts (one pooled client,
// BEGIN/COMMIT, named statements, pipelined: a write's refusal may be thrown by the next
// statement that is waited for, or by the commit, rather than by the write's own call). The engine (server/resources/engine.ts) decides what to
// read, lock and write; these only run the statements. Prisma keeps the schema, the
// migrations and the other writes (agents' sessions, stack locks, the delivery worker).
import type { LockMode } from './locks.js';
import type { HotReads, ResourceRow } from './hot-reads.js';

/** What shaping a read form reads: the hot reads outside a write, the transaction inside one. */
export type Rows = Pick<HotReads, 'resource' | 'children' | 'ofKind'>;

export interface NewEvent { id: string; type: string; resourceId: string; payload: unknown; createdAt: Date }
export interface NewDelivery { destinationId: string; eventSeq: number; nextAttemptAt: Date }

/** What recording an event needs (server/events/outbox.ts); Prisma's transactions offer it too (prisma-rows.ts). */
export interface EventWrites extends Rows {
  /** The rows with these ids that exist, in id order. */
  resources(ids: string[]): Promise<ResourceRow[]>;
  /** Inserts an event; returns its sequence number. */
  insertEvent(event: NewEvent): Promise<number>;
  insertDeliveries(rows: NewDelivery[]): Promise<void>;
}

export interface RefRow { fromId: string; path: string; toId: string; onDelete: string; heldId: string | null }
export interface KeyRow { scope: string; value: string; resourceId: string }

/** The statements of one write transaction. */
export interface Writes extends EventWrites {
  /**
   * Row locks (locks.ts) on these resources, in id order, returning the rows that exist as
   * they are once locked (one statement for both). SQLite's transaction already holds the
   * one write lock: there it only reads them.
   */
  lock(ids: string[], mode: LockMode): Promise<ResourceRow[]>;
  /** As `lock`, for rows whose existence is all that matters: the ids of those that exist, in id order (no document read). */
  hold(ids: string[], mode: LockMode): Promise<string[]>;
  /** Locks the children of these resources FOR UPDATE (about to be deleted with them). */
  lockChildren(parentIds: string[]): Promise<void>;
  /** A lock on a name until the commit (PostgreSQL's advisory lock; nothing on SQLite). */
  lockName(name: string): Promise<void>;
  /** The children of one resource, newest first. */
  childrenOfParent(parentId: string): Promise<ResourceRow[]>;
  insert(row: ResourceRow): Promise<void>;
  update(id: string, updatedAt: Date, data: unknown, sealed: string | null): Promise<void>;
  /** Deletes a row; the database removes its children, references, keys and token with it. */
  remove(id: string): Promise<void>;
  /** References at `path` from any of these resources. */
  refsFrom(fromIds: string[], path: string): Promise<{ fromId: string; toId: string }[]>;
  /** References to any of these resources. */
  referrers(toIds: string[]): Promise<RefRow[]>;
  /** Replaces the references a resource makes (`fresh`: a resource created in this transaction, which has none yet). */
  setRefs(fromId: string, refs: RefRow[], fresh?: boolean): Promise<void>;
  /** How many resources of `fromKind` reference `toId` at `path`. */
  countReferrers(toId: string, path: string, fromKind: string): Promise<number>;
  /** The keys among these that another resource than `resourceId` holds, in the order asked. */
  takenKeys(keys: { scope: string; value: string }[], resourceId: string): Promise<KeyRow[]>;
  /** Replaces the unique keys a resource holds (`fresh`: created in this transaction, none yet). */
  setKeys(resourceId: string, keys: { scope: string; value: string }[], fresh?: boolean): Promise<void>;
  /** Up to `take` keys of a scope whose value ends with `suffix`, held by another resource than `resourceId`. */
  keysEndingWith(scope: string, suffix: string, resourceId: string, take: number): Promise<KeyRow[]>;
  insertToken(digest: string, resourceId: string): Promise<void>;
}

/** Why a write transaction failed, in the engine's terms; undefined: not the database's refusal. */
export type WriteFailure = 'conflict' | 'unique' | 'reference' | 'busy';

export interface WriteStore {
  /**
   * Runs `fn` in one write transaction and commits it, or rolls it back if `fn` throws.
   * Waits its turn (SQLite: the one writer; PostgreSQL: a pooled connection) first.
   */
  transaction<T>(fn: (w: Writes) => Promise<T>): Promise<T>;
  /** Classifies a database error thrown out of `transaction`. */
  failure(e: unknown): WriteFailure | undefined;
}

/** How long a write waits for its turn before the request is answered 503 (as Prisma's maxWait was). */
export const MAX_WAIT_MS = 15_000;
