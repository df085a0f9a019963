// Opens the database named by a URL: a SQLite file (the embedded default) or PostgreSQL.
// Both share one Prisma schema; each has its own generated client and migrations.
import fs from 'node:fs';
import path from 'node:path';
import { PrismaClient as SqliteClient } from '../../generated/sqlite/client.js';
import type { SqlDriverAdapter, SqlDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import type { HotReads } from './hot-reads.js';
import { hotReadsPg } from './hot-pg.js';
import { hotReadsSqlite } from './hot-sqlite.js';
import type { WriteStore } from './hot-writes.js';
import { hotWritesPg } from './hot-writes-pg.js';
import { hotWritesSqlite } from './hot-writes-sqlite.js';
import { migratePostgres, migrateSqlite } from './migrate.js';
import { DEFAULT_START_TIMEOUT_MS, openPgPool, PG_DEFAULTS, type PgBounds, type PgLog } from './pg-pool.js';
import { isDatabaseUnavailable } from './unavailable.js';
import { serializedWriter, SqliteWriter } from './sqlite-writer.js';
import { cacheStatements } from './statement-cache.js';

export type Provider = 'sqlite' | 'postgresql';
/** Both generated clients have the same API; the SQLite one stands for both in types. */
export type Db = SqliteClient;
export type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

export interface Database {
  provider: Provider;
  /** Writes, and reads inside a write transaction. On SQLite one writer at a time (sqlite-writer.ts). */
  prisma: Db;
  /**
   * Reads outside a write transaction go here, and see only committed data. On SQLite its
   * own read-only connection (WAL lets it read while a write transaction is open, without
   * seeing it); on PostgreSQL the pool, whose every statement outside a transaction sees
   * committed rows only.
   */
  read: Db;
  /** The hot reads (get one, a page, children) as prepared statements on `read`'s own handle (hot-reads.ts). */
  hot: HotReads;
  /** The engine's write transactions as prepared statements on `prisma`'s own handle (hot-writes.ts). */
  writes: WriteStore;
  /** Where the data lives, for the start-up banner (no password). */
  where: string;
  migrated: string[];
  /**
   * The health check: a trivial query off the write path (SQLite: the read connection;
   * PostgreSQL: a connection of its own, never the pool a locked row can fill), bounded by
   * HEALTH_TIMEOUT_MS. Rejects when the database does not answer.
   */
  check(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** PostgreSQL's pool and its bounds (pg-pool.ts). */
  pg?: Partial<PgBounds>;
  /** How long a start waits for a PostgreSQL that is not answering yet (starting, recovering, restarting), ms (--database-start-timeout). */
  startTimeoutMs?: number;
  /** Operator log lines (a lost connection, waiting for the database at start). */
  log?: PgLog;
}

/** The health check's bound: past it the database counts as unreachable. */
export const HEALTH_TIMEOUT_MS = 2000;
const START_SETTING = '--database-start-timeout / EDGEFORM_DATABASE_START_TIMEOUT';

export function providerOf(url: string): Provider {
  if (/^postgres(ql)?:\/\//.test(url)) return 'postgresql';
  // A path with no scheme is a SQLite file; anything that looks like a URL but is not one of
  // the two forms (postgres:/u@host/db, with one slash, or mysql://) is refused rather than
  // becoming a SQLite file of that name in the working folder.
  if (url.startsWith('file:') || (!url.includes('://') && !/^[a-z][a-z0-9+.-]+:/i.test(url))) return 'sqlite';
  throw new Error(`unsupported database URL ${url.replace(/\/\/[^@]*@/, '//***@').replace(/^([a-z][a-z0-9+.-]+:\/?)[^@/]*@/i, '$1***@')}; use file:<path> (or a plain path) for SQLite, or postgresql://user@host:port/db (postgres:// too) for PostgreSQL`);
}

export const sqliteFile = (url: string) => url.replace(/^file:(\/\/)?/, '');

/**
 * Prisma records the calling code's location on every query unless told not to (a tenth
 * of a simple request's CPU); our errors never show Prisma's own text to a client.
 */
const CLIENT_OPTIONS = { errorFormat: 'minimal' } as const;

/**
 * SQLite's planner statistics, kept current: without them a route lookup by edge picked the
 * (kind, id) index and read every route (77 ms at 200,000 routes, 0.02 ms with them). Checks
 * every table and re-analyzes, on a sample of 1,000 rows per index, those never analyzed or
 * grown or shrunk a lot since; when none has, it costs microseconds. Run at start and after
 * every OPTIMIZE_EVERY committed writes. (PostgreSQL's autovacuum does this on its own.)
 */
const OPTIMIZE = 'PRAGMA analysis_limit = 1000; PRAGMA optimize = 0x10002';
const OPTIMIZE_EVERY = 1000;

/** A better-sqlite3 adapter factory whose connection compiles each statement once (statement-cache.ts). */
function withStatementCache(factory: SqlDriverAdapterFactory): SqlDriverAdapterFactory {
  return {
    provider: factory.provider,
    adapterName: factory.adapterName,
    connect: async () => {
      const adapter = await factory.connect();
      cacheStatements((adapter as unknown as { client: import('better-sqlite3').Database }).client);
      return adapter;
    },
  };
}

/** The driver handle (better-sqlite3 Database, pg Pool) of an adapter once Prisma connects through it. */
function capturing<H>(factory: SqlDriverAdapterFactory): { factory: SqlDriverAdapterFactory; handle: () => H } {
  let handle: H | undefined;
  return {
    factory: {
      provider: factory.provider,
      adapterName: factory.adapterName,
      connect: async () => {
        const adapter: SqlDriverAdapter = await factory.connect();
        handle = (adapter as unknown as { client: H }).client;
        return adapter;
      },
    },
    handle: () => {
      if (!handle) throw new Error('the database is not connected yet');
      return handle;
    },
  };
}

/**
 * Runs `attempt` until it succeeds, for as long as it fails because PostgreSQL is not
 * answering yet (starting, recovering after a crash, a failover, a restart), at most
 * `timeoutMs`; then fails with a message naming the setting.
 */
async function whenAnswering<T>(where: string, timeoutMs: number, log: PgLog, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let delay = 250;
  let said = false;
  for (;;) {
    try {
      return await attempt();
    } catch (e) {
      if (!isDatabaseUnavailable(e)) throw e;
      const left = deadline - Date.now();
      if (left <= 0) {
        const err = new Error(`PostgreSQL at ${where} did not answer within ${Math.round(timeoutMs / 1000)} s (${(e as Error).message}); is it running and reachable? Wait longer with ${START_SETTING}, or check --database / EDGEFORM_DATABASE_URL`);
        (err as Error & { code?: string }).code = 'EDGEFORM_DATABASE_START_TIMEOUT';
        throw err;
      }
      if (!said) {
        said = true;
        log({ level: 'warn', msg: `waiting for PostgreSQL at ${where} (${(e as Error).message}); giving up after ${Math.round(timeoutMs / 1000)} s (${START_SETTING})` });
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(delay, left)));
      delay = Math.min(delay * 2, 2000);
    }
  }
}

export async function openDatabase(url: string, options: OpenOptions = {}): Promise<Database> {
  const provider = providerOf(url);
  if (provider === 'sqlite') {
    const file = path.resolve(sqliteFile(url));
    fs.mkdirSync(path.dirname(file), { recursive: true });
    // Owner-only, like the key files: SQLite gives its -wal and -shm files the database file's mode.
    fs.closeSync(fs.openSync(file, 'a', 0o600));
    const migrated = await migrateSqlite(file);
    const { PrismaBetterSqlite3 } = await import('@prisma/adapter-better-sqlite3');
    // timeout is SQLite's busy_timeout: how long a writer waits for another process's writer.
    const connect = () => new PrismaBetterSqlite3({ url: `file:${file}`, timeout: 10_000 });
    const writer = new SqliteWriter({ every: OPTIMIZE_EVERY, script: OPTIMIZE });
    const writeHandle = capturing<import('better-sqlite3').Database>(withStatementCache(connect()));
    const prisma = new SqliteClient({ ...CLIENT_OPTIONS, adapter: serializedWriter(writeHandle.factory, writer) });
    await prisma.$executeRawUnsafe('PRAGMA foreign_keys = ON');
    for (const pragma of OPTIMIZE.split('; ')) await prisma.$queryRawUnsafe(pragma);
    const reader = capturing<import('better-sqlite3').Database>(connect());
    const read = new SqliteClient({ ...CLIENT_OPTIONS, adapter: reader.factory });
    await read.$executeRawUnsafe('PRAGMA query_only = ON');
    const hot = hotReadsSqlite(reader.handle());
    const writes = hotWritesSqlite(writeHandle.handle(), writer);
    const check = async () => { await read.$queryRawUnsafe('SELECT 1'); };
    return { provider, prisma, read, hot, writes, where: file, migrated, check, close: async () => { await read.$disconnect(); await prisma.$disconnect(); } };
  }
  const where = url.replace(/\/\/[^@]*@/, '//');
  const log = options.log ?? (() => {});
  const migrated = await whenAnswering(where, options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS, log, () => migratePostgres(url));
  const { PrismaPg } = await import('@prisma/adapter-pg');
  const { PrismaClient } = await import('../../generated/postgresql/client.js');
  const bounds = { ...PG_DEFAULTS, ...options.pg };
  const pool = await openPgPool(url, bounds, log);
  // Prisma's own transactions (bootstrap, agent sessions) wait for a connection as long as a request does.
  const prisma = new PrismaClient({ ...CLIENT_OPTIONS, adapter: new PrismaPg(pool), transactionOptions: { maxWait: bounds.acquireTimeoutMs } }) as unknown as Db;
  try {
    await prisma.$connect();
  } catch (e) {
    await pool.end().catch(() => {});
    throw e;
  }
  const health = pgHealth(url);
  return {
    provider, prisma, read: prisma, hot: hotReadsPg(pool), writes: hotWritesPg(pool), where, migrated,
    check: health.check,
    close: async () => {
      await health.close();
      await prisma.$disconnect();
      await pool.end().catch(() => {});
    },
  };
}

/**
 * The health check's own PostgreSQL connection: opened when first asked, kept, and opened
 * again after it is lost. Each check is bounded by HEALTH_TIMEOUT_MS, connecting included.
 */
function pgHealth(url: string) {
  let client: import('pg').Client | undefined;
  let connecting: Promise<import('pg').Client> | undefined;
  const drop = (c: import('pg').Client) => {
    if (client === c) client = undefined;
    void c.end().catch(() => {});
  };
  const open = async () => {
    const { default: Pg } = await import('pg');
    const c = new Pg.Client({ connectionString: url, connectionTimeoutMillis: HEALTH_TIMEOUT_MS, query_timeout: HEALTH_TIMEOUT_MS, statement_timeout: HEALTH_TIMEOUT_MS });
    c.on('error', () => drop(c));
    c.on('end', () => drop(c));
    try {
      await c.connect();
    } catch (e) {
      drop(c);
      throw e;
    }
    client = c;
    return c;
  };
  return {
    async check() {
      const c = client ?? await (connecting ??= open().finally(() => { connecting = undefined; }));
      try {
        await c.query('SELECT 1');
      } catch (e) {
        drop(c);
        throw e;
      }
    },
    async close() {
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
