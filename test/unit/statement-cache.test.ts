// The writer's statement cache (server/store/statement-cache.ts): each SQL text is compiled
// once, every binding of it runs with its own arguments, and the adapter (rows as arrays) and
// the engine's writes (rows as objects) share one bounded cache without seeing each other's form.
import Sqlite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { cacheStatements, statementsOf } from '../../server/store/statement-cache.js';

type Bound = { reader: boolean; bind(args: unknown[]): Bound; run(): { changes: number }; raw(): { all(): unknown[][] }; columns(): { name: string }[] };

/** An in-memory database whose statement cache holds `max` (the default without), the texts it compiled, and prepare as the adapter calls it. */
function cachedDb(max?: number) {
  const db = new Sqlite(':memory:');
  const compiled: string[] = [];
  const original = db.prepare.bind(db);
  db.prepare = ((sql: string) => { compiled.push(sql); return original(sql); }) as typeof db.prepare;
  if (max === undefined) cacheStatements(db);
  else cacheStatements(db, max);
  const prepare = (sql: string) => (db.prepare as unknown as (sql: string) => Bound)(sql);
  return { db, compiled, prepare };
}

describe('cacheStatements', () => {
  it('compiles a text once and runs each binding with its own arguments, as the adapter calls it', () => {
    const { compiled, prepare } = cachedDb();
    prepare('CREATE TABLE t (id TEXT, n INTEGER)').run();
    for (let i = 0; i < 3; i++) expect(prepare('INSERT INTO t VALUES (?, ?)').bind([`r${i}`, i]).run().changes).toBe(1);
    const select = prepare('SELECT id, n FROM t WHERE n >= ? ORDER BY n');
    expect(select.reader).toBe(true);
    expect(select.columns().map((c) => c.name)).toEqual(['id', 'n']);
    expect(select.bind([1]).raw().all()).toEqual([['r1', 1], ['r2', 2]]);
    expect(prepare('SELECT id, n FROM t WHERE n >= ? ORDER BY n').bind([2]).raw().all()).toEqual([['r2', 2]]);
    expect(compiled.filter((sql) => sql.startsWith('INSERT'))).toHaveLength(1);
    expect(compiled.filter((sql) => sql.startsWith('SELECT'))).toHaveLength(1);
  });

  it('keeps at most `max` statements, compiling a dropped one again when it comes back', () => {
    const { compiled, prepare } = cachedDb(2);
    const run = (sql: string) => prepare(sql).raw().all();
    for (const sql of ['SELECT 1', 'SELECT 2', 'SELECT 3', 'SELECT 1']) run(sql);
    expect(compiled).toEqual(['SELECT 1', 'SELECT 2', 'SELECT 3', 'SELECT 1']);
  });

  it("serves the adapter's raw rows and the engine's object rows of one text from one bounded cache", () => {
    const { db, compiled, prepare: adapter } = cachedDb(3);
    const engine = statementsOf(db);
    engine.get('CREATE TABLE t (id TEXT, n INTEGER)').run();
    engine.get('INSERT INTO t VALUES (?, ?)').run('a', 1);
    const sql = 'SELECT id, n FROM t';
    expect(adapter(sql).bind([]).raw().all()).toEqual([['a', 1]]);
    expect(engine.get(sql).all()).toEqual([{ id: 'a', n: 1 }]);
    expect(adapter(sql).bind([]).raw().all()).toEqual([['a', 1]]);
    expect(engine.get(sql).all()).toEqual([{ id: 'a', n: 1 }]);
    expect(compiled.filter((s) => s === sql)).toHaveLength(2);
    // The bound (3) counts both forms: a fourth statement drops the oldest, the CREATE.
    expect(compiled).toEqual(['CREATE TABLE t (id TEXT, n INTEGER)', 'INSERT INTO t VALUES (?, ?)', sql, sql]);
    engine.get('CREATE TABLE u (id TEXT)').run();
    engine.get('INSERT INTO t VALUES (?, ?)');
    expect(compiled.slice(4)).toEqual(['CREATE TABLE u (id TEXT)', 'INSERT INTO t VALUES (?, ?)']);
  });
});
