// Whether an error means "the database cannot serve this now" (a condition of the server,
// not of the request): the API answers it 503 with Retry-After, never 500, and a start
// waits for it to pass (--database-start-timeout). One list, used by the API's error handler
// (server/http/reply.ts fromDatabaseError), the start-up retry (db.ts) and the health check.
//
// An error may arrive as the driver threw it (node-postgres, better-sqlite3), or wrapped by
// Prisma (a code P1xxx/P2xxx, the driver adapter's error under meta or cause): every layer
// of the chain is looked at.

/** Driver and Prisma codes for "unavailable", exact. */
const CODES = new Set([
  // Prisma: cannot reach (P1001), timed out (P1002, P1008), connection closed (P1017),
  // pool timeout (P2024), too many connections (P2037), transaction could not start in time (P2028).
  'P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2028', 'P2037',
  // Sockets.
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE',
  // PostgreSQL SQLSTATEs: too many connections (53300), out of memory (53200), terminated by
  // an administrator (57P01), crash shutdown (57P02), cannot connect now: starting up or
  // recovering (57P03), a standby that cannot run a write (25006), lock_timeout (55P03),
  // statement_timeout or a cancel (57014), idle-in-transaction timeout (25P03).
  '53300', '53200', '57P01', '57P02', '57P03', '57P04', '25006', '55P03', '57014', '25P03',
]);

/** SQLSTATE classes that are "unavailable" as a whole: 08 is every connection exception. */
const CLASSES = ['08'];

/** The Prisma driver adapter's kinds (DriverAdapterError cause.kind) for the same conditions. */
const KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'TlsConnectionError']);

/** Messages that carry no code: node-postgres and pg-pool say these in words only. */
const MESSAGES = [
  /^Connection terminated/i, // the connection ended mid-query
  /not queryable/i, // a client used after its connection failed
  /timeout exceeded when trying to connect/i, // pg-pool's acquire timeout (connectionTimeoutMillis)
  /Client was closed and is not queryable/i,
  /Cannot use a pool after calling end/i,
  /the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)/i,
  /too many (clients|connections)/i,
  /Unable to start a transaction in the given time/i,
];

/** More conditions may be added by other parts of the server (a full disk, for one). */
const extraCodes = new Set<string>();
export function addUnavailableCodes(...codes: string[]) {
  for (const c of codes) extraCodes.add(c);
}

interface Layer { code?: unknown; name?: unknown; message?: unknown; kind?: unknown; cause?: unknown; meta?: unknown; originalCode?: unknown }

function layers(error: unknown): Layer[] {
  const out: Layer[] = [];
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length && out.length < 12) {
    const e = queue.shift();
    if (!e || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const l = e as Layer & { driverAdapterError?: unknown };
    out.push(l);
    queue.push(l.cause, l.meta, l.driverAdapterError);
    if (l.meta && typeof l.meta === 'object') queue.push((l.meta as { driverAdapterError?: unknown }).driverAdapterError);
  }
  return out;
}

/** True when `error` says the database is away, full of connections, still starting, or did not answer within its bounds. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (const l of layers(error)) {
    if (l.name === 'PrismaClientInitializationError') return true;
    for (const c of [l.code, l.originalCode]) {
      if (typeof c !== 'string' || !c) continue;
      if (CODES.has(c) || extraCodes.has(c)) return true;
      if (/^[0-9A-Z]{5}$/.test(c) && CLASSES.some((k) => c.startsWith(k))) return true;
    }
    if (typeof l.kind === 'string' && KINDS.has(l.kind)) return true;
    if (typeof l.message === 'string' && MESSAGES.some((m) => m.test(l.message as string))) return true;
  }
  return false;
}
