// The stack-lock extension (/_edgeform/stack_locks/{stack}) on both databases: one lock
// per stack however many requests race for it, also across two server instances on one
// PostgreSQL database; renewal by the holder, refusal naming the holder, release by lock
// id only, expiry after the lease, and the API's error shapes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { expectError, expectInvalid, RFC3339 } from '../helpers/api.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';

const holder = (n: number) => ({ lock_id: `run-${n}`, host: `host-${n}`, pid: 1000 + n, command: `edgeform apply -f m${n}/`, who: `user${n}@host-${n}` });
const at = (stack: string) => `/_edgeform/stack_locks/${stack}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Pair { a: TestServer; b: TestServer; close(): Promise<void> }

/** Two server instances on one database (one on SQLite), with a lease long enough that no lock expires by accident. */
const LONG = 600;
/** Servers on the same database with a short lease, for expiry. */
const SHORT = 2;

function suite(name: string, open: (lease: number, on?: Pair) => Promise<Pair>) {
  describe(name, () => {
    let a: TestServer;
    let b: TestServer;
    let short: Pair;
    let long: Pair;
    beforeAll(async () => {
      long = await open(LONG);
      short = await open(SHORT, long);
      ({ a, b } = long);
    });
    afterAll(async () => {
      await short?.close();
      await long?.close();
    });

    it('50 runs racing for one stack (over two server instances): exactly one holds it, the others are told who', async () => {
      const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? b : a).put(at('race'), holder(i))));
      const won = replies.filter((r) => r.status === 200);
      expect(won).toHaveLength(1);
      const winner = won[0].body;
      for (const r of replies.filter((x) => x.status !== 200)) {
        const body = expectError(r, 409, 'ERR_SERVICE_328');
        expect((body.details.lock as any).lock_id).toBe(winner.lock_id);
      }
      expect((await a.get(at('race'))).body).toEqual(winner);
      expect((await b.get(at('race'))).body).toEqual(winner);
    });

    it('the holder renews (created_at kept, expiry moved); another id is refused naming the holder; release needs the holder\'s id', async () => {
      const first = await a.put(at('payments'), holder(1));
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ stack: 'payments', ...holder(1), lease_seconds: LONG });
      expect(first.body.created_at).toMatch(RFC3339);
      await sleep(1100);
      const renewed = await b.put(at('payments'), holder(1));
      expect(renewed.status).toBe(200);
      expect(renewed.body.created_at).toBe(first.body.created_at);
      expect(Date.parse(renewed.body.expires_at)).toBeGreaterThan(Date.parse(first.body.expires_at));
      const refused = expectError(await a.put(at('payments'), holder(2)), 409, 'ERR_SERVICE_328');
      expect(refused.details.lock).toEqual(renewed.body);
      expect(refused.msg).toContain('run-1');
      expectError(await a.del(`${at('payments')}?lock_id=run-2`), 409, 'ERR_SERVICE_328');
      expectInvalid(await a.del(at('payments')), 'lock_id', 'ERR_SERVICE_104');
      // Another stack is another lock.
      expect((await a.put(at('billing'), holder(2))).status).toBe(200);
      expect((await a.del(`${at('payments')}?lock_id=run-1`)).status).toBe(204);
      expectError(await a.get(at('payments')), 404, 'ERR_SERVICE_304');
      expectError(await a.del(`${at('payments')}?lock_id=run-1`), 404, 'ERR_SERVICE_304');
    });

    it('a lock not renewed within its lease is free for the next run', async () => {
      expect((await short.a.put(at('expiring'), holder(1))).body.lease_seconds).toBe(SHORT);
      await sleep(SHORT * 1000 + 300);
      expectError(await short.a.get(at('expiring')), 404, 'ERR_SERVICE_304');
      const taken = await short.b.put(at('expiring'), holder(2));
      expect(taken.status).toBe(200);
      expect(taken.body.lock_id).toBe('run-2');
      // The old holder's release no longer touches it (on a server whose lease is long, so it stays held).
      expect((await a.put(at('expiring'), holder(2))).body.lease_seconds).toBe(LONG);
      expectError(await a.del(`${at('expiring')}?lock_id=run-1`), 409, 'ERR_SERVICE_328');
    });

    it('refuses a bad stack name or body with the API\'s errors', async () => {
      expectInvalid(await a.put(at('no%20spaces'), holder(1)), 'stack');
      expectInvalid(await a.put(at('s'), { ...holder(1), pid: -1 }), 'pid');
      expectInvalid(await a.put(at('s'), { ...holder(1), lock_id: '' }), 'lock_id');
      expectError(await a.put(at('s'), { ...holder(1), extra: 1 }), 400, 'ERR_SERVICE_102');
    });
  });
}

// One server per SQLite database (docs/operations.md): the short-lease server has a database of its own.
suite('stack locks on SQLite', async (lease) => {
  const a = await startTestServer({ stackLockLeaseSeconds: lease });
  return { a, b: a, close: () => a.close() };
});

describe.skipIf(!postgresAvailable())('on PostgreSQL', () => {
  let url: string;
  suite('stack locks on PostgreSQL, two server instances on one database', async (lease, on) => {
    const pg = on ? undefined : await startPostgres();
    if (pg) url = await pg.createDatabase('locks');
    // One database, one key: instances of it must share the secret key.
    const a = await startTestServer({ databaseUrl: url, stackLockLeaseSeconds: lease, secretKey: TEST_SECRET_KEY });
    const b = await startTestServer({ databaseUrl: url, stackLockLeaseSeconds: lease, secretKey: TEST_SECRET_KEY });
    return {
      a,
      b,
      async close() {
        await a.close();
        await b.close();
        pg?.stop();
      },
    };
  });
});
