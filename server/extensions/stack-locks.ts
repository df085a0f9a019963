// Stack locks: the reconciler's lease on a stack, so that two runs of `edgeform apply` on
// one stack cannot write at once (docs/api.md, "Stack locks"). An edgeform extension
// under its own path, outside SPEC's resources: one row per locked stack, taken,
// renewed and released by single SQL statements, so two servers on one PostgreSQL
// database (or two requests on one SQLite file) can never both hand it out. Expiry is
// compared with the database's clock, which every server instance shares.
import { z } from 'zod';
import { ApiError, invalid } from '../http/errors.js';
import { parseInput } from '../http/validation.js';
import type { Ctx } from '../resources/context.js';
import { extraRoute } from '../resources/routes.js';
import { rfc3339 } from '../events/outbox.js';

export const STACK_LOCKS_PATH = '/_edgeform/stack_locks';
/** How long a lock lives without renewal, unless the server says otherwise (EDGEFORM_STACK_LOCK_LEASE). */
export const DEFAULT_LEASE_SECONDS = 60;
const TAG = 'Stack locks (edgeform extension)';
const STACK = /^[a-z0-9._-]{1,64}$/i;

const holderFields = {
  lock_id: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 letters, digits, ".", "_" or "-"').describe('Chosen by the run (a UUID); renewing and releasing name it.'),
  host: z.string().max(255).describe('The host the run is on.'),
  pid: z.number().int().min(0).max(2 ** 31 - 1).describe('The process id of the run.'),
  command: z.string().max(2000).describe('The command line of the run, without secrets.'),
  who: z.string().max(255).optional().describe('The user running it.'),
};
const acquireBody = z.strictObject(holderFields);

export const lockRead = z.object({
  ...holderFields,
  who: z.string(),
  stack: z.string(),
  created_at: z.string().describe('When the run took the lock (RFC 3339).'),
  expires_at: z.string().describe('When the lease ends unless renewed (RFC 3339).'),
  lease_seconds: z.number().int().describe('The lease length; the holder renews well within it.'),
});

interface Row { stack: string; lockId: string; host: string; pid: number | bigint; command: string; who: string; createdAt: number | bigint; expiresAt: number | bigint }

const leaseOf = (ctx: Ctx) => ctx.stackLockLeaseSeconds ?? DEFAULT_LEASE_SECONDS;

function present(ctx: Ctx, row: Row) {
  return {
    stack: row.stack,
    lock_id: row.lockId,
    host: row.host,
    pid: Number(row.pid),
    command: row.command,
    who: row.who,
    created_at: rfc3339(new Date(Number(row.createdAt))),
    expires_at: rfc3339(new Date(Number(row.expiresAt))),
    lease_seconds: leaseOf(ctx),
  };
}

export function stackOf(params: Record<string, string>): string {
  const stack = params.stack;
  if (!STACK.test(stack)) throw invalid('stack', `"${stack}" is not a stack name: 1-64 letters, digits, ".", "_" or "-"`);
  return stack;
}

/** The database's clock, in ms: the one every server instance compares expiry with. */
async function dbNow(ctx: Ctx): Promise<number> {
  const sql = ctx.db.provider === 'sqlite'
    ? `SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) AS now`
    : `SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) AS now`;
  const [row] = await ctx.db.prisma.$queryRawUnsafe<{ now: number | bigint }[]>(sql);
  return Number(row.now);
}

async function current(ctx: Ctx, stack: string, now: number | bigint): Promise<Row | undefined> {
  const rows = await ctx.db.prisma.$queryRaw<Row[]>`SELECT * FROM "StackLock" WHERE "stack" = ${stack} AND "expiresAt" > ${BigInt(now)}`;
  return rows[0];
}

const held = (ctx: Ctx, row: Row, what: string) =>
  new ApiError('ERR_SERVICE_328', `stack "${row.stack}" is locked by another run (lock ${row.lockId}, ${row.command}, pid ${row.pid} on ${row.host}, since ${rfc3339(new Date(Number(row.createdAt)))}); ${what}`, { lock: present(ctx, row) });

const notLocked = (stack: string) => new ApiError('ERR_SERVICE_304', `stack "${stack}" is not locked (no lock was taken, it was released, or its lease expired)`, { stack });

async function acquire(ctx: Ctx, stack: string, input: unknown) {
  if (input === undefined || input === null || typeof input !== 'object' || Array.isArray(input)) throw new ApiError('ERR_SERVICE_100', 'the request body must be a JSON object');
  const body = parseInput(acquireBody, input);
  const now = BigInt(await dbNow(ctx));
  const expires = now + BigInt(leaseOf(ctx) * 1000);
  const who = body.who ?? '';
  // One statement: insert, or take over an expired lock, or renew our own; a live lock of
  // another run is left as it is and nothing is returned.
  const rows = await ctx.db.prisma.$queryRaw<Row[]>`
    INSERT INTO "StackLock" ("stack", "lockId", "host", "pid", "command", "who", "createdAt", "expiresAt")
    VALUES (${stack}, ${body.lock_id}, ${body.host}, ${body.pid}, ${body.command}, ${who}, ${now}, ${expires})
    ON CONFLICT ("stack") DO UPDATE SET
      "createdAt" = CASE WHEN "StackLock"."lockId" = excluded."lockId" THEN "StackLock"."createdAt" ELSE excluded."createdAt" END,
      "lockId" = excluded."lockId", "host" = excluded."host", "pid" = excluded."pid",
      "command" = excluded."command", "who" = excluded."who", "expiresAt" = excluded."expiresAt"
    WHERE "StackLock"."lockId" = excluded."lockId" OR "StackLock"."expiresAt" <= ${now}
    RETURNING *`;
  if (rows[0]) return present(ctx, rows[0]);
  const holder = await current(ctx, stack, now);
  // Released or expired between the two statements: the caller simply tries again.
  if (!holder) throw new ApiError('ERR_SERVICE_328', `stack "${stack}" changed hands while the lock was being taken; retry`, { stack });
  throw held(ctx, holder, 'wait for it to finish, or release it with its lock id (edgeform force-unlock)');
}

async function release(ctx: Ctx, stack: string, lockId: string | string[] | undefined) {
  if (typeof lockId !== 'string' || lockId === '') throw new ApiError('ERR_SERVICE_104', 'lock_id: give the id of the lock to release (?lock_id=...)', { field: 'lock_id', reason: 'required' });
  const deleted = await ctx.db.prisma.$executeRaw`DELETE FROM "StackLock" WHERE "stack" = ${stack} AND "lockId" = ${lockId}`;
  if (deleted) return;
  const holder = await current(ctx, stack, await dbNow(ctx));
  if (holder) throw held(ctx, holder, `lock ${lockId} is not it`);
  throw notLocked(stack);
}

const path = `${STACK_LOCKS_PATH}/{stack}`;

extraRoute({
  method: 'PUT',
  path,
  summary: 'Take or renew the lock of a stack (edgeform extension; 409 naming the holder while another run holds it)',
  tag: TAG,
  request: acquireBody,
  status: 200,
  response: lockRead,
  handle: (ctx, req) => acquire(ctx, stackOf(req.params), req.body),
});

extraRoute({
  method: 'GET',
  path,
  summary: 'Who holds the lock of a stack (edgeform extension; 404 when nobody does)',
  tag: TAG,
  status: 200,
  response: lockRead,
  handle: async (ctx, req) => {
    const stack = stackOf(req.params);
    const row = await current(ctx, stack, await dbNow(ctx));
    if (!row) throw notLocked(stack);
    return present(ctx, row);
  },
});

extraRoute({
  method: 'DELETE',
  path,
  summary: 'Release the lock of a stack, naming its lock id (edgeform extension)',
  tag: TAG,
  query: ['lock_id'],
  status: 204,
  handle: async (ctx, req) => {
    await release(ctx, stackOf(req.params), req.query.lock_id);
  },
});
