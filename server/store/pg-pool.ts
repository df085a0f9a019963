// The PostgreSQL connections of a server: one pool (Prisma's driver adapter, the hot reads and
// the engine's write transactions all share it), and the bounds that keep one slow or locked
// row, or a database that went away, from holding a request (or the process) for good.
//
// - Every connection has PostgreSQL's lock_timeout and statement_timeout set: a write waiting
//   for a row another client holds FOR UPDATE gives up after the lock timeout (55P03), any
//   statement after the statement timeout (57014); both are answered 503 (unavailable.ts).
// - A request waits at most the acquire timeout for a pooled connection (pg-pool's
//   connectionTimeoutMillis, also the bound on opening a new one), then 503.
// - A connection that dies (a restart, a failover, pg_terminate_backend) emits 'error' on its
//   client; node-postgres throws an 'error' event nobody listens to, which ends the process.
//   The pool listens for its idle clients; `listenWhileHeld` covers a client held by a
//   transaction between two statements.
import type { Pool, PoolClient } from 'pg';

export interface PgBounds {
  /** Connections in the pool (--database-pool-size). */
  poolSize: number;
  /** How long a request waits for a pooled connection, ms (--database-acquire-timeout). */
  acquireTimeoutMs: number;
  /** PostgreSQL lock_timeout of every pooled connection, ms (--database-lock-timeout). */
  lockTimeoutMs: number;
  /** PostgreSQL statement_timeout of every pooled connection, ms (--database-statement-timeout). */
  statementTimeoutMs: number;
}

/** How long a start waits for a PostgreSQL that does not answer yet, ms (--database-start-timeout). */
export const DEFAULT_START_TIMEOUT_MS = 30_000;

export const PG_DEFAULTS: PgBounds = { poolSize: 10, acquireTimeoutMs: 5000, lockTimeoutMs: 5000, statementTimeoutMs: 30_000 };

export type PgLog = (fields: Record<string, unknown>) => void;

/** Says once per outage (not once per idle connection) that the pool lost connections. */
function rateLimited(log: PgLog, everyMs: number) {
  let last = 0;
  return (msg: string) => {
    const now = Date.now();
    if (now - last < everyMs) return;
    last = now;
    log({ level: 'warn', msg });
  };
}

export async function openPgPool(url: string, bounds: PgBounds, log: PgLog): Promise<Pool> {
  const { default: Pg } = await import('pg');
  const pool = new Pg.Pool({
    connectionString: url,
    max: bounds.poolSize,
    connectionTimeoutMillis: bounds.acquireTimeoutMs,
    lock_timeout: bounds.lockTimeoutMs,
    statement_timeout: bounds.statementTimeoutMs,
    // A connection idle this long is closed; the pool opens one again when needed.
    idleTimeoutMillis: 30_000,
  });
  const warn = rateLimited(log, 5000);
  pool.on('error', (e) => warn(`database: a pooled connection was lost (${e.message}); requests use new connections once the database answers`));
  return pool;
}

const quiet = () => {};

/** Keeps a client held outside the pool's care (a write transaction) from ending the process if its connection dies; returns the undo. */
export function listenWhileHeld(client: PoolClient): () => void {
  client.on('error', quiet);
  return () => client.removeListener('error', quiet);
}

/** Every 'error' of a client is heard (a dropped connection otherwise ends the process): `onError` sees it. */
export function guarded<C extends { on(event: 'error', fn: (e: Error) => void): unknown }>(client: C, onError: (e: Error) => void = quiet): C {
  client.on('error', onError);
  return client;
}
