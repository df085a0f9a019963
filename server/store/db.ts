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
  close(): Promise<void>;
}

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

export async function openDatabase(url: string): Promise<Database> {
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
    return { provider, prisma, read, hot, writes, where: file, migrated, close: async () => { await read.$disconnect(); await prisma.$disconnect(); } };
  }
  const migrated = await migratePostgres(url);
  const { PrismaPg } = await import('@prisma/adapter-pg');
  const { PrismaClient } = await import('../../generated/postgresql/client.js');
  const pool = capturing<import('pg').Pool>(new PrismaPg({ connectionString: url }));
  const prisma = new PrismaClient({ ...CLIENT_OPTIONS, adapter: pool.factory }) as unknown as Db;
  await prisma.$connect();
  return { provider, prisma, read: prisma, hot: hotReadsPg(pool.handle()), writes: hotWritesPg(pool.handle()), where: url.replace(/\/\/[^@]*@/, '//'), migrated, close: () => prisma.$disconnect() };
}
