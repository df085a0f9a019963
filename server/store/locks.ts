// Row locks for the write transactions of the resource engine. PostgreSQL runs them under
// READ COMMITTED, where a row read and then written by two transactions at once loses
// one write unless the row is locked first; these take the lock. On SQLite a write
// transaction holds the database's only write lock from its first statement
// (sqlite-writer.ts), so it is already serializable and these do nothing.
//
// Modes, weakest first (PostgreSQL's row-level locks; each conflicts with the ones named):
//   KEY SHARE      "this row must keep existing" (referenced, parent of a new child)   - UPDATE
//   SHARE          "this row must not change" (cycle checks, the caller's bot)         - NO KEY UPDATE, UPDATE
//   NO KEY UPDATE  "I change this row's document" (PATCH, module PUT/DELETE)           - SHARE, itself, UPDATE
//   UPDATE         "I delete this row" (DELETE, its children, cascades)                - every mode
// A statement after the lock sees the row's latest committed version; a row deleted while
// waiting is not returned, so the caller answers as if it never existed.
import type { Provider, Tx } from './db.js';

export type LockMode = 'KEY SHARE' | 'SHARE' | 'NO KEY UPDATE' | 'UPDATE';

const placeholders = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `$${i + from}`).join(', ');

/** Locks the Resource rows with these ids, in id order (so two lockers cannot deadlock on them). */
export async function lockResources(tx: Tx, provider: Provider, ids: string[], mode: LockMode): Promise<void> {
  const unique = [...new Set(ids.filter(Boolean))];
  if (provider !== 'postgresql' || !unique.length) return;
  await tx.$queryRawUnsafe(`SELECT "id" FROM "Resource" WHERE "id" IN (${placeholders(unique.length)}) ORDER BY "id" FOR ${mode}`, ...unique);
}

/** Locks the children of these resources FOR UPDATE (they are about to be deleted with them). */
export async function lockChildren(tx: Tx, provider: Provider, parentIds: string[]): Promise<void> {
  if (provider !== 'postgresql' || !parentIds.length) return;
  await tx.$queryRawUnsafe(`SELECT "id" FROM "Resource" WHERE "parentId" IN (${placeholders(parentIds.length)}) ORDER BY "id" FOR UPDATE`, ...parentIds);
}
