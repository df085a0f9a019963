// The two databases a suite runs on, and a server on either: SQLite always, PostgreSQL (a
// throwaway cluster, scripts/pg-cluster.mjs) where initdb is on the PATH.
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import type { ServerConfig } from '../../server/config.js';
import { startTestServer, type TestServer } from './server.js';

export const pgAvailable: boolean = postgresAvailable();

/** For describe.each: each database, with whether its cases must be skipped here. */
export const DATABASES = [
  { db: 'SQLite', skip: false },
  { db: 'PostgreSQL', skip: !pgAvailable },
] as const;

/** A test server on `db` (a fresh database named `name` in a cluster of its own on PostgreSQL); close() stops both. */
export async function serverOn(db: 'SQLite' | 'PostgreSQL', name: string, overrides: Partial<ServerConfig> = {}): Promise<{ s: TestServer; close(): Promise<void>; databaseUrl: string }> {
  if (db === 'SQLite') {
    const s = await startTestServer(overrides);
    return { s, close: () => s.close(), databaseUrl: `file:${s.server.db.where}` };
  }
  const pg = await startPostgres();
  try {
    const databaseUrl = await pg.createDatabase(name);
    const s = await startTestServer({ databaseUrl, ...overrides });
    return { s, close: async () => { await s.close().catch(() => {}); pg.stop(); }, databaseUrl };
  } catch (e) {
    pg.stop();
    throw e;
  }
}

/**
 * A row of the hot reads (a TextRow, dates kept as text until asked for) in the plain shape
 * Prisma reads, to compare the two.
 */
export const asPrismaRow = <R extends { id: string; kind: string; parentId: string | null; createdAt: Date; updatedAt: Date; data: unknown; sealed: string | null }>(r: R | undefined) =>
  r && { id: r.id, kind: r.kind, parentId: r.parentId, createdAt: r.createdAt, updatedAt: r.updatedAt, data: r.data, sealed: r.sealed };
