// Row locks for the write transactions of the resource engine. PostgreSQL runs them under
// READ COMMITTED, where a row read and then written by two transactions at once loses
// one write unless the row is locked first; these take the lock. On SQLite a write
// transaction holds the database's only write lock from its first statement
// (hot-writes-sqlite.ts), so it is already serializable and these do nothing.
//
// Modes, weakest first (PostgreSQL's row-level locks; each conflicts with the ones named):
//   KEY SHARE      "this row must keep existing" (referenced, parent of a new child)   - UPDATE
//   SHARE          "this row must not change" (cycle checks, the caller's bot)         - NO KEY UPDATE, UPDATE
//   NO KEY UPDATE  "I change this row's document" (PATCH, module PUT/DELETE)           - SHARE, itself, UPDATE
//   UPDATE         "I delete this row" (DELETE, its children, cascades)                - every mode
// A statement after the lock sees the row's latest committed version; a row deleted while
// waiting is not returned, so the caller answers as if it never existed.
// The statements that take them are PostgreSQL's (hot-writes-pg.ts): rows are locked in id
// order, so two lockers cannot deadlock on them.

export type LockMode = 'KEY SHARE' | 'SHARE' | 'NO KEY UPDATE' | 'UPDATE';
