// One bounded cache of prepared statements per better-sqlite3 connection, shared by Prisma's
// adapter and the engine's write transactions (hot-writes-sqlite.ts) on the writer
// connection. Prisma's adapter prepares every statement afresh (`prepare(sql).bind(args)`),
// a tenth of a write's CPU, and its statements repeat: `cacheStatements` hands it a thin
// binding of a cached statement instead, serving only the calls the adapter makes (reader,
// columns(), bind(args), run(), raw().all()).
import type BetterSqlite3 from 'better-sqlite3';

/** Distinct statements kept per connection; the oldest goes first (IN lists make new texts). */
const MAX_STATEMENTS = 500;

export interface Statements {
  /**
   * The statement of `sql`, compiled on first use. `raw`: one that returns rows as arrays
   * (the adapter's form). raw(true) changes a statement for every later caller, so the two
   * forms of one text are kept apart; both count towards the one bound.
   */
  get(sql: string, raw?: boolean): BetterSqlite3.Statement;
}

const caches = new WeakMap<BetterSqlite3.Database, Statements>();

/** The connection's statement cache, made on first call with the connection's own prepare (`max` counts then). */
export function statementsOf(db: BetterSqlite3.Database, max = MAX_STATEMENTS): Statements {
  let statements = caches.get(db);
  if (!statements) {
    statements = bounded(db.prepare.bind(db), max);
    caches.set(db, statements);
  }
  return statements;
}

function bounded(prepare: (sql: string) => BetterSqlite3.Statement, max: number): Statements {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    get(sql, raw = false) {
      // No SQL text begins with NUL.
      const key = raw ? `\0${sql}` : sql;
      let stmt = cache.get(key);
      if (!stmt) {
        stmt = prepare(sql);
        if (raw && stmt.reader) stmt.raw(true);
        if (cache.size >= max) cache.delete(cache.keys().next().value!);
        cache.set(key, stmt);
      }
      return stmt;
    },
  };
}

/** Makes the connection's prepare (as Prisma's adapter calls it) serve from its statement cache. */
export function cacheStatements(db: BetterSqlite3.Database, max = MAX_STATEMENTS): void {
  const statements = statementsOf(db, max);
  (db as { prepare: unknown }).prepare = (sql: string) => {
    const stmt = statements.get(sql, true);
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
      raw: () => ({ all: () => stmt.all(...args) }),
    };
    return bound;
  };
}
