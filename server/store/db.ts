// Opens the database named by a URL: a SQLite file (the embedded default) or PostgreSQL.
// Both share one Prisma schema; each has its own generated client and migrations.
import fs from 'node:fs';
import path from 'node:path';
import { PrismaClient as SqliteClient } from '../../generated/sqlite/client.js';
import { migratePostgres, migrateSqlite } from './migrate.js';
import { serializedWriter } from './sqlite-writer.js';

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
  /** Where the data lives, for the start-up banner (no password). */
  where: string;
  migrated: string[];
  close(): Promise<void>;
}

export function providerOf(url: string): Provider {
  if (/^postgres(ql)?:\/\//.test(url)) return 'postgresql';
  if (url.startsWith('file:') || !url.includes('://')) return 'sqlite';
  throw new Error(`unsupported database URL ${url.replace(/\/\/[^@]*@/, '//***@')}; use file:<path> or postgresql://...`);
}

export const sqliteFile = (url: string) => url.replace(/^file:(\/\/)?/, '');

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
    const prisma = new SqliteClient({ adapter: serializedWriter(connect()) });
    await prisma.$executeRawUnsafe('PRAGMA foreign_keys = ON');
    const read = new SqliteClient({ adapter: connect() });
    await read.$executeRawUnsafe('PRAGMA query_only = ON');
    return { provider, prisma, read, where: file, migrated, close: async () => { await read.$disconnect(); await prisma.$disconnect(); } };
  }
  const migrated = await migratePostgres(url);
  const { PrismaPg } = await import('@prisma/adapter-pg');
  const { PrismaClient } = await import('../../generated/postgresql/client.js');
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }) as unknown as Db;
  return { provider, prisma, read: prisma, where: url.replace(/\/\/[^@]*@/, '//'), migrated, close: () => prisma.$disconnect() };
}
