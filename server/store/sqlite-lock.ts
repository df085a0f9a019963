// One server per SQLite database. A second `edgeform serve` on the same file would run its own
// ingress and agent gateway: its writes never reach the first server's routing table, and
// commands for agents connected to the other one are 404. So a server holds an exclusive lock
// on `<database>-lock` next to the database for as long as it runs, and a second one is refused.
//
// The lock is SQLite's own (a POSIX advisory lock the kernel holds for the process): the file
// is a small SQLite database opened in EXCLUSIVE locking mode and written once, after which
// the connection keeps its exclusive lock until it is closed. The kernel drops it when the
// process ends however it ends, so a kill -9 leaves nothing that blocks the next start (the
// file stays, unlocked). Within one process SQLite refuses a second connection the same way.
// Tools that read the database while the server runs (edgeform backup, edgeform admin) do not
// take it; edgeform restore does, so it cannot replace a database a server holds.
import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { providerOf, sqliteFile } from './db.js';

export const lockFileOf = (databaseFile: string) => `${path.resolve(databaseFile)}-lock`;

/** A start refused because another server holds the database: its message is the one line the operator reads. */
export class SqliteDatabaseInUse extends Error {}

export interface SqliteLock {
  file: string;
  release(): void;
}

/**
 * Takes the lock of the SQLite database of `url` (nothing for PostgreSQL, which serves several
 * instances), or throws SqliteDatabaseInUse naming `who` (what is refused) and the way out.
 */
export function lockSqliteDatabase(url: string, who = 'a second edgeform serve'): SqliteLock | undefined {
  if (providerOf(url) !== 'sqlite') return undefined;
  const databaseFile = path.resolve(sqliteFile(url));
  const file = lockFileOf(databaseFile);
  // A first start: the data folder is made here, before the database is (db.ts makes it too).
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // timeout 0: a held lock answers SQLITE_BUSY at once rather than after the busy timeout.
  const db = new Database(file, { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, since TEXT NOT NULL)');
    // The first write takes the exclusive lock, which EXCLUSIVE mode keeps until close.
    db.transaction(() => {
      db.exec('DELETE FROM holder');
      db.prepare('INSERT INTO holder (pid, since) VALUES (?, ?)').run(process.pid, new Date().toISOString());
    })();
  } catch (e) {
    db.close();
    if (/^SQLITE_BUSY/.test((e as { code?: string }).code ?? '')) {
      throw new SqliteDatabaseInUse(
        `another edgeform server is running on the SQLite database ${databaseFile} (it holds ${file}), so ${who} is refused: a SQLite database serves one server. Stop the other one first, or run several instances on PostgreSQL (--database / EDGEFORM_DATABASE_URL postgresql://...; see docs/operations.md, "One server per SQLite database")`,
      );
    }
    throw e;
  }
  let released = false;
  return {
    file,
    release() {
      if (released) return;
      released = true;
      db.close();
    },
  };
}
