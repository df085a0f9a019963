// Opens the database named by a URL: a SQLite file (the embedded default) or PostgreSQL.
// Both share one Prisma schema; each has its own generated client and migrations.
import fs from 'node:fs';
import path from 'node:path';
import { PrismaClient as SqliteClient } from '../../generated/sqlite/client.js';
import { migratePostgres, migrateSqlite } from './migrate.js';

export type Provider = 'sqlite' | 'postgresql';
/** Both generated clients have the same API; the SQLite one stands for both in types. */
export type Db = SqliteClient;
export type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

export interface Database {
  provider: Provider;
  prisma: Db;
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
    const prisma = new SqliteClient({ adapter: new PrismaBetterSqlite3({ url: `file:${file}`, timeout: 10_000 }) });
    await prisma.$executeRawUnsafe('PRAGMA foreign_keys = ON');
    return { provider, prisma, where: file, migrated, close: () => prisma.$disconnect() };
  }
  const migrated = await migratePostgres(url);
  const { PrismaPg } = await import('@prisma/adapter-pg');
  const { PrismaClient } = await import('../../generated/postgresql/client.js');
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }) as unknown as Db;
  return { provider, prisma, where: url.replace(/\/\/[^@]*@/, '//'), migrated, close: () => prisma.$disconnect() };
}
