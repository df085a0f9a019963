// The authentication cache (server/resources/caller-cache.ts) never outlives what it
// remembers: a key deleted, a bot deactivated or deleted, is refused by the very next
// request on the instance that did it, and within a second on another instance of the same
// PostgreSQL database; a bot reactivated works again at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { startPostgres } from '../../scripts/pg-cluster.mjs';
import { DATABASES, pgAvailable, serverOn } from '../helpers/databases.js';
import { expectError } from '../helpers/api.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';

const available = pgAvailable;
if (!available) console.warn('\n*** SKIPPING the caller cache on PostgreSQL: initdb is not on the PATH ***\n');

/** A bot with a key, the key already used twice (so its caller is cached). */
async function warmBotKey(s: TestServer, name: string) {
  const bot = (await s.post('/bot_users', { name })).body;
  const key = (await s.post('/api_keys', { owner_id: bot.id })).body;
  for (let i = 0; i < 2; i++) expect((await s.get('/ip_policies?limit=1', { token: key.token })).status).toBe(200);
  return { bot, key };
}

describe.each(DATABASES)('on $db, the instance that made the change', ({ db, skip }) => {
  let server: Awaited<ReturnType<typeof serverOn>> | undefined;
  let s: TestServer;
  beforeAll(async () => {
    if (skip) return;
    server = await serverOn(db, 'callers');
    s = server.s;
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });

  it.skipIf(skip)('a deleted key is refused by the next request', async () => {
    const { key } = await warmBotKey(s, 'deleted-key');
    expect((await s.del(`/api_keys/${key.id}`)).status).toBe(204);
    expectError(await s.get('/ip_policies?limit=1', { token: key.token }), 401, 'ERR_SERVICE_202');
  });

  it.skipIf(skip)("a deactivated bot's key is refused by the next request, and works again as soon as the bot is reactivated", async () => {
    const { bot, key } = await warmBotKey(s, 'deactivated');
    expect((await s.patch(`/bot_users/${bot.id}`, { active: false })).status).toBe(200);
    expectError(await s.get('/ip_policies?limit=1', { token: key.token }), 401, 'ERR_SERVICE_203');
    expect((await s.patch(`/bot_users/${bot.id}`, { active: true })).status).toBe(200);
    expect((await s.get('/ip_policies?limit=1', { token: key.token })).status).toBe(200);
  });

  it.skipIf(skip)("a deleted bot's keys are refused by the next request", async () => {
    const { bot, key } = await warmBotKey(s, 'deleted-bot');
    expect((await s.del(`/bot_users/${bot.id}`)).status).toBe(204);
    expectError(await s.get('/ip_policies?limit=1', { token: key.token }), 401, 'ERR_SERVICE_202');
  });

  it.skipIf(skip)('a bot deactivated by its own key: that key is refused by its next request', async () => {
    const { bot, key } = await warmBotKey(s, 'self');
    // Only an admin may change a bot, so the bot's key is refused, and stays valid.
    expectError(await s.patch(`/bot_users/${bot.id}`, { active: false }, { token: key.token }), 403, 'ERR_SERVICE_211');
    expect((await s.get('/ip_policies?limit=1', { token: key.token })).status).toBe(200);
    expect((await s.patch(`/bot_users/${bot.id}`, { active: false })).status).toBe(200);
    expectError(await s.get('/ip_policies?limit=1', { token: key.token }), 401, 'ERR_SERVICE_203');
  });
});

describe.skipIf(!available)('on PostgreSQL, another instance of the same database', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.createDatabase('callers_two');
    a = await startTestServer({ databaseUrl: url, secretKey: TEST_SECRET_KEY });
    b = await startTestServer({ databaseUrl: url, secretKey: TEST_SECRET_KEY });
  }, 120_000);
  afterAll(async () => {
    await b?.close().catch(() => {});
    await a?.close().catch(() => {});
    pg?.stop();
  });

  /** B's answers to the key, every 100 ms until refused: at most 30 looks (3 s, well past the one-second promise). */
  async function untilRefused(token: string) {
    for (let i = 0; i < 30; i++) {
      const r = await b.get('/ip_policies?limit=1', { token });
      if (r.status !== 200) return r;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return b.get('/ip_policies?limit=1', { token });
  }

  it('a key deleted on one instance is refused on the other', async () => {
    const { key } = await warmBotKey(b, 'other-instance-key');
    expect((await a.del(`/api_keys/${key.id}`)).status).toBe(204);
    expectError(await untilRefused(key.token), 401, 'ERR_SERVICE_202');
  });

  it('writes with a key just deleted on one instance, while the other still remembers it: refused as the key, nothing lands', async () => {
    const key = (await b.post('/api_keys', { description: 'deleted while remembered' })).body;
    for (let i = 0; i < 2; i++) expect((await b.get('/ip_policies?limit=1', { token: key.token })).status).toBe(200);
    const before = (await a.get('/ip_policies?limit=100')).body.ip_policies.length;
    expect((await a.del(`/api_keys/${key.id}`)).status).toBe(204);
    // The key is checked again inside each write: a write that would itself have failed (404) is refused as the key.
    expectError(await b.patch('/ip_policies/ipp_00000000000000000000000000', { description: 'x' }, { token: key.token }), 401, 'ERR_SERVICE_202');
    expectError(await b.post('/ip_policies', { description: 'must not land' }, { token: key.token }), 401, 'ERR_SERVICE_202');
    expect((await a.get('/ip_policies?limit=100')).body.ip_policies.length).toBe(before);
  });

  it("a bot deactivated on one instance: its key is refused on the other", async () => {
    const { bot, key } = await warmBotKey(b, 'other-instance-bot');
    expect((await a.patch(`/bot_users/${bot.id}`, { active: false })).status).toBe(200);
    expectError(await untilRefused(key.token), 401, 'ERR_SERVICE_203');
  });
});
