// `edgeform backup FILE` and `edgeform restore FILE`: a consistent copy of the server's database,
// taken while it runs, and the way back. Copying data/edgeform.db of a running server omits its
// write-ahead log (the last acknowledged writes live there until a checkpoint), so `cp` restores
// a database that silently misses them.
//
// SQLite: `VACUUM INTO` on a read connection copies one snapshot (a read transaction: every
// write committed before it began, none after) without stopping the server's writes. The copy
// is written under a temporary name, synced, checked and renamed. Restore refuses while a
// server holds the database (sqlite-lock.ts), removes the old database's -wal and -shm (a stale
// log would be replayed onto the restored file) and renames the backup into place.
// PostgreSQL: pg_dump (custom format) and pg_restore, when they are on the PATH; restore
// refuses while other sessions are connected to the database.
//
// The secret key is never in a backup: a backup is readable only with the key it was taken
// under, kept apart from it (docs/operations.md).
import { spawnSync } from 'node:child_process';
import Database from 'better-sqlite3';
import { Command, Option } from 'commander';
import fs from 'node:fs';
import path from 'node:path';
import { resolveConfig, type ServerConfig } from '../server/config.js';
import { providerOf, sqliteFile } from '../server/store/db.js';
import { CHECK_SETTING, configuredKey } from '../server/store/secret-key.js';
import { lockSqliteDatabase } from '../server/store/sqlite-lock.js';
import type { Io } from './reconcile.js';

const GUIDE = 'docs/operations.md, "Backup and restore"';

/** A failure the operator can act on: its message is the one line printed. */
class Refused extends Error {}

function databaseOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--database <url>', 'file:<path> for SQLite or postgresql://... (default file:<data-dir>/edgeform.db), as for serve').env('EDGEFORM_DATABASE_URL'))
    .addOption(new Option('--data-dir <dir>', 'the server\'s data folder, as for serve').env('EDGEFORM_DATA_DIR').default('data'))
    .option('--json', 'print one JSON object with what was done on stdout (progress stays on stderr)');
}

interface Summary {
  provider: 'sqlite' | 'postgresql';
  file: string;
  database: string;
  bytes: number;
  resources?: number;
  events?: number;
}

export function backupCommands(setCode: (code: number) => void, io: () => Io): Command[] {
  const run = (job: (config: ServerConfig, file: string, opts: Record<string, unknown>, progress: (msg: string) => void) => Promise<Summary & { notes?: string[] }>) =>
    async (file: string, opts: Record<string, unknown>) => {
      const out = io();
      let config: ServerConfig;
      try {
        config = resolveConfig({ database: opts.database as string | undefined, dataDir: opts.dataDir as string | undefined });
        providerOf(config.databaseUrl);
      } catch (e) {
        out.err(`Error: ${(e as Error).message}\n`);
        if (opts.json) out.out(`${JSON.stringify({ error: (e as Error).message })}\n`);
        return setCode(2);
      }
      try {
        const done = await job(config, path.resolve(file), opts, (msg) => out.err(`${msg}\n`));
        const { notes = [], ...summary } = done;
        for (const n of notes) out.err(`${n}\n`);
        if (opts.json) out.out(`${JSON.stringify({ ...summary, notes })}\n`);
        setCode(0);
      } catch (e) {
        out.err(`Error: ${(e as Error).message}\n`);
        if (opts.json) out.out(`${JSON.stringify({ error: (e as Error).message })}\n`);
        setCode(1);
      }
    };

  const backup = databaseOptions(new Command('backup'))
    .description('Write a consistent copy of the server\'s database to FILE, while the server runs: every write acknowledged before the backup began is in it. SQLite: a snapshot of the database file (VACUUM INTO); PostgreSQL: pg_dump in its custom format. The secret key is not in the backup: keep it too, apart.')
    .argument('<file>', 'where to write the backup (refused if it exists, unless --force)')
    .option('--force', 'replace FILE if it exists')
    .addHelpText('after', `
Run it with the same --database / --data-dir (or EDGEFORM_DATABASE_URL / EDGEFORM_DATA_DIR) as edgeform serve.
Exit codes: 0 written, 1 failed (nothing is left at FILE), 2 bad option.
Restore with edgeform restore FILE; see ${GUIDE}.`)
    .action(run(async (config, file, opts, progress) => {
      if (fs.existsSync(file) && !opts.force) throw new Refused(`${file} exists; choose another file, or pass --force to replace it`);
      return providerOf(config.databaseUrl) === 'sqlite' ? backupSqlite(config, file, progress) : backupPostgres(config, file, progress);
    }));

  const restore = databaseOptions(new Command('restore'))
    .description('Replace the server\'s database with a backup made by edgeform backup. Refused while a server runs on the database: stop every instance first. The server then starts on it with the key the backup was taken under.')
    .argument('<file>', 'a backup written by edgeform backup')
    .option('--force', 'replace a database that already holds data (its contents are lost)')
    .addHelpText('after', `
Run it with the same --database / --data-dir (or EDGEFORM_DATABASE_URL / EDGEFORM_DATA_DIR) as edgeform serve.
Exit codes: 0 restored, 1 refused or failed (the database is left as it was), 2 bad option.
See ${GUIDE}.`)
    .action(run(async (config, file, opts, progress) => {
      if (!fs.existsSync(file)) throw new Refused(`no backup at ${file}`);
      return providerOf(config.databaseUrl) === 'sqlite' ? restoreSqlite(config, file, !!opts.force, progress) : restorePostgres(config, file, !!opts.force, progress);
    }));
  return [backup, restore];
}

const counts = (db: Database.Database) => ({
  resources: (db.prepare('SELECT count(*) AS n FROM "Resource"').get() as { n: number }).n,
  events: (db.prepare('SELECT count(*) AS n FROM "Event"').get() as { n: number }).n,
});

/** The backup's secret key check value, or undefined (no key recorded yet). */
const checkOf = (db: Database.Database) => (db.prepare('SELECT value FROM "Setting" WHERE key = ?').get(CHECK_SETTING) as { value: string } | undefined)?.value;

function syncFile(file: string) {
  const fd = fs.openSync(file, 'r+');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function syncDir(dir: string) {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Opens an edgeform SQLite database read-only, or says what `file` is instead. */
function openEdgeformFile(file: string, what: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('Resource', 'Setting', 'Event')`).all();
    if (tables.length !== 3) throw new Refused(`${file} is not an edgeform database (${what})`);
    return db;
  } catch (e) {
    db?.close();
    if (e instanceof Refused) throw e;
    const code = (e as { code?: string }).code ?? '';
    if (code === 'SQLITE_CANTOPEN') throw new Refused(`cannot open ${file} (${what}): no such file, or it cannot be read`);
    if (code === 'SQLITE_NOTADB') throw new Refused(`${file} is not a SQLite database (${what})`);
    throw e;
  }
}

async function backupSqlite(config: ServerConfig, file: string, progress: (msg: string) => void): Promise<Summary> {
  const source = path.resolve(sqliteFile(config.databaseUrl));
  if (!fs.existsSync(source)) throw new Refused(`no database at ${source}; pass the --database or --data-dir the server runs with`);
  const db = openEdgeformFile(source, 'the database to back up');
  const partial = `${file}.partial-${process.pid}`;
  try {
    const size = fs.statSync(source).size + (fs.existsSync(`${source}-wal`) ? fs.statSync(`${source}-wal`).size : 0);
    progress(`backing up ${source} (${Math.ceil(size / 1024)} KiB with its write-ahead log) to ${file}`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.rmSync(partial, { force: true });
    // One read transaction: a snapshot of every committed write, the server writing on meanwhile.
    db.prepare('VACUUM INTO ?').run(partial);
  } catch (e) {
    fs.rmSync(partial, { force: true });
    throw e;
  } finally {
    db.close();
  }
  try {
    fs.chmodSync(partial, 0o600);
    syncFile(partial);
    const copy = openEdgeformFile(partial, 'the backup just written');
    let summary;
    try {
      const ok = (copy.prepare('PRAGMA quick_check').get() as { quick_check: string }).quick_check;
      if (ok !== 'ok') throw new Error(`the backup failed its check (${ok})`);
      summary = counts(copy);
    } finally {
      copy.close();
    }
    fs.renameSync(partial, file);
    syncDir(path.dirname(file));
    const bytes = fs.statSync(file).size;
    progress(`wrote ${file}: ${summary.resources} resources, ${summary.events} events, ${bytes} bytes; the secret key is not in it (${GUIDE})`);
    return { provider: 'sqlite', file, database: source, bytes, ...summary };
  } catch (e) {
    fs.rmSync(partial, { force: true });
    throw e;
  }
}

/** What to say when the backup's key is not the one the server would start with. */
function keyNotes(config: ServerConfig, check: string | undefined): string[] {
  if (!check) return [];
  let box;
  try {
    box = configuredKey(config).box;
  } catch {
    box = undefined;
  }
  if (box?.check() === check) return [];
  const where = process.env.EDGEFORM_SECRET_KEY ? 'EDGEFORM_SECRET_KEY' : `${config.secretKeyFile} (EDGEFORM_SECRET_KEY_FILE)`;
  return [`Warning: the restored database's secrets are sealed with a key that is not ${box ? 'the one in' : 'at'} ${where}; put the key the backup was taken under there before starting edgeform serve (it refuses any other)`];
}

async function restoreSqlite(config: ServerConfig, file: string, force: boolean, progress: (msg: string) => void): Promise<Summary & { notes: string[] }> {
  const target = path.resolve(sqliteFile(config.databaseUrl));
  const backup = openEdgeformFile(file, 'the backup to restore');
  let check;
  let summary;
  try {
    const ok = (backup.prepare('PRAGMA quick_check').get() as { quick_check: string }).quick_check;
    if (ok !== 'ok') throw new Refused(`${file} failed its check (${ok}); it cannot be restored`);
    check = checkOf(backup);
    summary = counts(backup);
  } finally {
    backup.close();
  }
  fs.mkdirSync(path.dirname(target), { recursive: true });
  // Held until the restored file is in place: no server starts on a half-restored database.
  const lock = lockSqliteDatabase(config.databaseUrl, 'edgeform restore');
  try {
    if (fs.existsSync(target) && fs.statSync(target).size > 0 && !force) {
      throw new Refused(`${target} already holds a database; pass --force to replace it (its contents are lost: back it up first with edgeform backup)`);
    }
    progress(`restoring ${file} (${summary.resources} resources, ${summary.events} events) to ${target}`);
    const partial = `${target}.restore-${process.pid}`;
    try {
      fs.copyFileSync(file, partial);
      fs.chmodSync(partial, 0o600);
      syncFile(partial);
      // The old database's log and index would be read as the restored file's.
      for (const side of ['-wal', '-shm', '-journal']) fs.rmSync(`${target}${side}`, { force: true });
      fs.renameSync(partial, target);
      syncDir(path.dirname(target));
    } catch (e) {
      fs.rmSync(partial, { force: true });
      throw e;
    }
  } finally {
    lock?.release();
  }
  progress(`restored ${target}; start edgeform serve on it with the secret key the backup was taken under`);
  return { provider: 'sqlite', file, database: target, bytes: fs.statSync(target).size, ...summary, notes: keyNotes(config, check) };
}

/** A PostgreSQL client program, or a refusal that says how to do without it. */
function pgTool(name: 'pg_dump' | 'pg_restore'): string {
  const found = spawnSync(name, ['--version'], { encoding: 'utf8' });
  if (found.error || found.status !== 0) {
    throw new Refused(
      `${name} is not on the PATH: on PostgreSQL, edgeform ${name === 'pg_dump' ? 'backup' : 'restore'} runs PostgreSQL's own ${name}; install the PostgreSQL client programs (the server's major version or newer), or run ${name === 'pg_dump' ? 'pg_dump --format=custom --file FILE "$EDGEFORM_DATABASE_URL"' : 'pg_restore --clean --if-exists --no-owner --single-transaction --dbname "$EDGEFORM_DATABASE_URL" FILE'} yourself (${GUIDE})`,
    );
  }
  return name;
}

const redacted = (url: string) => url.replace(/\/\/[^@/]*@/, '//***@');

function runTool(tool: string, args: string[], what: string) {
  const r = spawnSync(tool, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${tool} failed ${what} (exit ${r.status}): ${(r.stderr || '').trim().split('\n').slice(-3).join(' / ')}`);
}

async function backupPostgres(config: ServerConfig, file: string, progress: (msg: string) => void): Promise<Summary> {
  const tool = pgTool('pg_dump');
  const partial = `${file}.partial-${process.pid}`;
  progress(`backing up ${redacted(config.databaseUrl)} with pg_dump to ${file}`);
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    // pg_dump reads one snapshot (a repeatable-read transaction) while the server writes on.
    runTool(tool, ['--format=custom', '--no-owner', '--file', partial, '--dbname', config.databaseUrl], `backing up ${redacted(config.databaseUrl)}`);
    fs.chmodSync(partial, 0o600);
    syncFile(partial);
    fs.renameSync(partial, file);
    syncDir(path.dirname(file));
  } catch (e) {
    fs.rmSync(partial, { force: true });
    throw e;
  }
  const bytes = fs.statSync(file).size;
  progress(`wrote ${file}: ${bytes} bytes; the secret key is not in it (${GUIDE})`);
  return { provider: 'postgresql', file, database: redacted(config.databaseUrl), bytes };
}

async function restorePostgres(config: ServerConfig, file: string, force: boolean, progress: (msg: string) => void): Promise<Summary & { notes: string[] }> {
  const tool = pgTool('pg_restore');
  const pg = await import('pg');
  const client = new pg.default.Client({ connectionString: config.databaseUrl });
  await client.connect();
  let check: string | undefined;
  try {
    const others = await client.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
    if (others.rows[0].n > 0) {
      throw new Refused(`${others.rows[0].n} other session(s) are connected to ${redacted(config.databaseUrl)} (a running edgeform serve?); stop every instance before restoring`);
    }
    const tables = await client.query(`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'Resource'`);
    if (tables.rows[0].n > 0 && !force) {
      const rows = await client.query('SELECT count(*)::int AS n FROM "Resource"');
      if (rows.rows[0].n > 0) throw new Refused(`${redacted(config.databaseUrl)} already holds a database; pass --force to replace it (its contents are lost: back it up first with edgeform backup)`);
    }
  } finally {
    await client.end();
  }
  progress(`restoring ${file} to ${redacted(config.databaseUrl)} with pg_restore`);
  runTool(tool, ['--clean', '--if-exists', '--no-owner', '--single-transaction', '--dbname', config.databaseUrl, file], `restoring ${file}`);
  const after = new pg.default.Client({ connectionString: config.databaseUrl });
  await after.connect();
  let resources: number;
  try {
    check = (await after.query('SELECT value FROM "Setting" WHERE key = $1', [CHECK_SETTING])).rows[0]?.value;
    resources = (await after.query('SELECT count(*)::int AS n FROM "Resource"')).rows[0].n;
  } finally {
    await after.end();
  }
  progress(`restored ${redacted(config.databaseUrl)}: ${resources} resources; start edgeform serve on it with the secret key the backup was taken under`);
  return { provider: 'postgresql', file, database: redacted(config.databaseUrl), bytes: fs.statSync(file).size, resources, notes: keyNotes(config, check) };
}
