// Prisma's better-sqlite3 adapter prepares every statement afresh (`prepare(sql).bind(args)`),
// a tenth of a write's CPU; its statements repeat (a write sends the same dozen every time).
// This keeps the prepared statements of a connection by their SQL and hands the adapter a
// thin binding of one, so each is compiled once. Only the calls the adapter makes are served:
// reader, columns(), bind(args), run(), raw().all().
import type BetterSqlite3 from 'better-sqlite3';

/** Distinct statements kept per connection; the oldest goes first (IN lists make new texts). */
const MAX_STATEMENTS = 500;

export function cacheStatements(db: BetterSqlite3.Database, max = MAX_STATEMENTS): void {
  const prepare = db.prepare.bind(db);
  const cache = new Map<string, BetterSqlite3.Statement>();
  const statementFor = (sql: string) => {
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = prepare(sql);
      if (cache.size >= max) cache.delete(cache.keys().next().value!);
      cache.set(sql, stmt);
    }
    return stmt;
  };
  (db as { prepare: unknown }).prepare = (sql: string) => {
    const stmt = statementFor(sql);
    let args: unknown[] = [];
    // Statements are run synchronously to the end (run, all), so one may serve every caller in turn.
    const bound = {
      reader: stmt.reader,
      columns: () => stmt.columns(),
      bind: (values: unknown[]) => {
        args = values;
        return bound;
      },
      run: () => stmt.run(...args),
      raw: () => ({ all: () => stmt.raw(true).all(...args) }),
    };
    return bound;
  };
}
