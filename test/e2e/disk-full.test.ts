// A full disk under the database answers writes 503 ERR_SERVICE_507 with Retry-After (it was
// 500), reads keep working, /healthz reports storage "full" (it said 200), and everything is
// back once space is: the next write commits and /healthz is 200 again. SQLite's SQLITE_FULL
// comes from the real engine (the writer connection's max_page_count pinned to the database's
// size); PostgreSQL's 53100 from a trigger that raises disk_full on insert, through the real
// driver and Prisma adapter.
import { describe, expect, it } from 'vitest';
import { DATABASES, serverOn } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';

/** Makes the database refuse to grow (true) or lets it again (false). */
async function fill(s: TestServer, db: 'SQLite' | 'PostgreSQL', full: boolean) {
  const prisma = s.server.db.prisma;
  if (db === 'SQLite') {
    const pages = ((await prisma.$queryRawUnsafe('PRAGMA page_count')) as { page_count: number | bigint }[])[0].page_count;
    await prisma.$queryRawUnsafe(`PRAGMA max_page_count = ${full ? Number(pages) : 1073741823}`);
    return;
  }
  if (full) {
    await prisma.$executeRawUnsafe(`CREATE OR REPLACE FUNCTION edgeform_test_disk_full() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$ LANGUAGE plpgsql`);
    await prisma.$executeRawUnsafe(`CREATE TRIGGER edgeform_test_disk_full BEFORE INSERT ON "Resource" FOR EACH ROW EXECUTE FUNCTION edgeform_test_disk_full()`);
  } else {
    await prisma.$executeRawUnsafe(`DROP TRIGGER edgeform_test_disk_full ON "Resource"`);
  }
}

describe.each(DATABASES)('a full disk on $db', ({ db, skip }) => {
  it.skipIf(skip)('writes answer 503 ERR_SERVICE_507 with Retry-After, reads still work, /healthz reports it until a write commits again', async () => {
    const { s, close } = await serverOn(db, 'diskfull');
    try {
      const kept = await s.post('/ip_policies', { description: 'before' });
      expect(kept.status).toBe(201);
      expect((await s.get('/healthz')).status).toBe(200);
      await fill(s, db, true);
      // Free pages inside the file absorb a few rows; within a bounded number of creates the database must grow.
      let refused;
      for (let i = 0; i < 500 && !refused; i++) {
        const r = await s.post('/ip_policies', { description: 'x'.repeat(250), metadata: 'm'.repeat(4000) });
        if (r.status !== 201) refused = r;
      }
      expect(refused, 'the database never ran out of space').toBeDefined();
      expect(refused!.status, refused!.text).toBe(503);
      expect(refused!.body.error_code).toBe('ERR_SERVICE_507');
      expect(refused!.headers.get('retry-after')).toBe('30');
      expect(refused!.body.msg).toMatch(/disk is full/);
      const health = await s.get('/healthz');
      expect(health.status).toBe(503);
      expect(health.body).toMatchObject({ status: 'unavailable', database: 'ok', storage: 'full' });
      expect((await s.get(`/ip_policies/${kept.body.id}`)).status).toBe(200);

      await fill(s, db, false);
      expect((await s.post('/ip_policies', {})).status).toBe(201);
      const healthy = await s.get('/healthz');
      expect(healthy.status).toBe(200);
      expect(healthy.body).toMatchObject({ status: 'ok' });
    } finally {
      await close();
    }
  }, 120_000);
});
