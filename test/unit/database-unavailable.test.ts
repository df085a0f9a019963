// The one list of "the database is unavailable" conditions (server/store/unavailable.ts), as
// the API's error handler uses it: 503 with Retry-After for each, whether the driver threw it
// or Prisma wrapped it; a request's own database errors (a taken key, a deadlock the engine
// retries) are not among them. The real conditions are produced against real clusters in
// test/e2e/postgres-outage.test.ts.
import { describe, expect, it } from 'vitest';
import { fromDatabaseError } from '../../server/http/reply.js';
import { isDatabaseUnavailable } from '../../server/store/unavailable.js';

/** An error as node-postgres makes one from PostgreSQL's ErrorResponse. */
const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'FATAL' });

describe('isDatabaseUnavailable', () => {
  it.each([
    ['too many connections (53300)', pgError('53300', 'sorry, too many clients already')],
    ['terminated by an administrator (57P01)', pgError('57P01', 'terminating connection due to administrator command')],
    ['crash shutdown (57P02)', pgError('57P02', 'terminating connection because of crash of another server process')],
    ['starting up (57P03)', pgError('57P03', 'the database system is starting up')],
    ['a connection exception (class 08)', pgError('08006', 'connection failure')],
    ['a read-only standby after a failover (25006)', pgError('25006', 'cannot execute UPDATE in a read-only transaction')],
    ['the lock timeout (55P03)', pgError('55P03', 'canceling statement due to lock timeout')],
    ['the statement timeout (57014)', pgError('57014', 'canceling statement due to statement timeout')],
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['a reset connection', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['a connection that ended mid-query', new Error('Connection terminated unexpectedly')],
    ['a client that is not queryable', new Error('Client has encountered a connection error and is not queryable')],
    ['the pool\'s acquire timeout', new Error('timeout exceeded when trying to connect')],
    ['Prisma: too many connections (P2037)', Object.assign(new Error('Too many database connections opened'), { code: 'P2037', name: 'PrismaClientKnownRequestError' })],
    ['Prisma: a transaction that could not start in time (P2028)', Object.assign(new Error('Transaction API error: Unable to start a transaction in the given time.'), { code: 'P2028' })],
    ['Prisma: cannot reach the database', Object.assign(new Error('Can\'t reach database server'), { name: 'PrismaClientInitializationError' })],
    ['Prisma wrapping the driver adapter\'s kind', Object.assign(new Error('x'), { meta: { driverAdapterError: { cause: { kind: 'TooManyConnections' } } } })],
    ['a wrapped cause', new Error('query failed', { cause: pgError('57P01', 'terminating connection') })],
  ])('%s', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
    const answer = fromDatabaseError(error);
    expect(answer?.status).toBe(503);
    expect(answer?.code).toBe('ERR_SERVICE_503');
    expect(Number(answer?.headers['Retry-After'])).toBeGreaterThan(0);
  });

  it.each([
    ['a taken unique key (23505)', pgError('23505', 'duplicate key value violates unique constraint')],
    ['a deadlock the engine retries (40P01)', pgError('40P01', 'deadlock detected')],
    ['a syntax error (42601)', pgError('42601', 'syntax error')],
    ['a plain error', new Error('something else')],
    ['no error at all', undefined],
  ])('not %s', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
    expect(fromDatabaseError(error)).toBeUndefined();
  });
});
