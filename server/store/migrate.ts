// Applies the committed SQL migrations (prisma/migrations/<provider>/<name>/migration.sql)
// in name order, each in its own transaction, recorded in _edgeform_migrations and never
// re-applied. A recorded migration whose file changed is an error, not a silent skip.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';
import type { Provider } from './db.js';

const root = path.join(packageRoot ?? '.', 'prisma/migrations');

/** The migrations carried inside the single executable (scripts/build-cli-exe.mjs), which has no files beside it. */
declare const __EDGEFORM_MIGRATIONS__: Record<string, { name: string; sql: string }[]> | undefined;

interface Migration { name: string; sql: string; checksum: string }

export function migrationsFor(provider: Provider): Migration[] {
  const dir = path.join(root, provider);
  const found =
    typeof __EDGEFORM_MIGRATIONS__ === 'object'
      ? __EDGEFORM_MIGRATIONS__[provider]
      : fs
          .readdirSync(dir)
          .filter((d) => fs.existsSync(path.join(dir, d, 'migration.sql')))
          .sort()
          .map((name) => ({ name, sql: fs.readFileSync(path.join(dir, name, 'migration.sql'), 'utf8') }));
  return found.map(({ name, sql }) => ({ name, sql, checksum: createHash('sha256').update(sql).digest('hex') }));
}

const TABLE = `CREATE TABLE IF NOT EXISTS "_edgeform_migrations" ("name" TEXT PRIMARY KEY, "checksum" TEXT NOT NULL, "applied_at" TEXT NOT NULL)`;

function check(applied: Map<string, string>, m: Migration) {
  const recorded = applied.get(m.name);
  if (recorded && recorded !== m.checksum) {
    throw new Error(`migration ${m.name} was applied with different contents; restore prisma/migrations as it was`);
  }
  return !recorded;
}

export async function migrateSqlite(file: string): Promise<string[]> {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.exec(TABLE);
    const applied = new Map(db.prepare('SELECT name, checksum FROM _edgeform_migrations').all().map((r: any) => [r.name, r.checksum]));
    const done: string[] = [];
    for (const m of migrationsFor('sqlite')) {
      if (!check(applied, m)) continue;
      db.transaction(() => {
        db.exec(m.sql);
        db.prepare('INSERT INTO _edgeform_migrations (name, checksum, applied_at) VALUES (?, ?, ?)').run(m.name, m.checksum, new Date().toISOString());
      })();
      done.push(m.name);
    }
    return done;
  } finally {
    db.close();
  }
}

export async function migratePostgres(url: string): Promise<string[]> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  // A connection lost mid-migration fails the statement under way (and the start); unheard, its 'error' would end the process.
  client.on('error', () => {});
  await client.connect();
  try {
    // Several server instances may start at once; one migrates while the others wait.
    await client.query('SELECT pg_advisory_lock(7268431)');
    await client.query(TABLE);
    const { rows } = await client.query('SELECT name, checksum FROM _edgeform_migrations');
    const applied = new Map(rows.map((r: any) => [r.name, r.checksum]));
    const done: string[] = [];
    for (const m of migrationsFor('postgresql')) {
      if (!check(applied, m)) continue;
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO _edgeform_migrations (name, checksum, applied_at) VALUES ($1, $2, $3)', [m.name, m.checksum, new Date().toISOString()]);
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK');
        throw e;
      }
      done.push(m.name);
    }
    return done;
  } finally {
    await client.query('SELECT pg_advisory_unlock(7268431)').catch(() => {});
    await client.end();
  }
}
