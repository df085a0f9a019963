// What a key may do to keys, credentials and bots it does not own, the admin user's last key,
// and the way back in with shell access (docs/api.md, "Permissions"). Issue: a bot's key could
// delete the admin's only key, after which no key could ever name another owner again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { expectError } from '../helpers/api.js';
import { runCli } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('a bot\'s key and what others own', () => {
  let s: TestServer;
  let adminId: string;
  let bot: { id: string; token: string };
  beforeAll(async () => {
    s = await startTestServer();
    adminId = s.server.bootstrap.userId!;
    const b = await s.post('/bot_users', { name: 'ci' });
    const k = await s.post('/api_keys', { owner_id: b.body.id });
    bot = { id: b.body.id, token: k.body.token };
  });
  afterAll(async () => { await s.close(); });

  it.each([
    { reason: 'an admin\'s API key', path: '/api_keys', body: { description: 'admin second key' } },
    { reason: 'an admin\'s credential', path: '/credentials', body: { description: 'admin agent' } },
  ])('may read but neither change nor delete $reason', async ({ path, body }) => {
    const owned = await s.post(path, body);
    expect(owned.status).toBe(201);
    expect((await s.get(`${path}/${owned.body.id}`, { token: bot.token })).status).toBe(200);
    const patched = expectError(await s.patch(`${path}/${owned.body.id}`, { description: 'mine now' }, { token: bot.token }), 403, 'ERR_SERVICE_211');
    expect(patched.msg).toContain(adminId);
    expectError(await s.del(`${path}/${owned.body.id}`, { token: bot.token }), 403, 'ERR_SERVICE_211');
    expect((await s.get(`${path}/${owned.body.id}`)).body.description).toBe(body.description);
  });

  it('may not delete the admin user\'s only key (the lockout of the audit)', async () => {
    const keys = (await s.get('/api_keys')).body.keys.filter((k: { owner_id: string }) => k.owner_id === adminId);
    for (const k of keys) expectError(await s.del(`/api_keys/${k.id}`, { token: bot.token }), 403, 'ERR_SERVICE_211');
    expect((await s.get('/ip_policies')).status).toBe(200);
  });

  it('may not create, change, re-activate or delete bot users', async () => {
    const other = await s.post('/bot_users', { name: 'other' });
    expectError(await s.post('/bot_users', { name: 'child' }, { token: bot.token }), 403, 'ERR_SERVICE_211');
    expectError(await s.patch(`/bot_users/${other.body.id}`, { name: 'renamed' }, { token: bot.token }), 403, 'ERR_SERVICE_211');
    expect((await s.patch(`/bot_users/${other.body.id}`, { active: false })).body.active).toBe(false);
    expectError(await s.patch(`/bot_users/${other.body.id}`, { active: true }, { token: bot.token }), 403, 'ERR_SERVICE_211');
    expect((await s.get(`/bot_users/${other.body.id}`)).body.active).toBe(false);
    expectError(await s.del(`/bot_users/${other.body.id}`, { token: bot.token }), 403, 'ERR_SERVICE_211');
    // Not even itself: a bot's key is not how bots are administered.
    expectError(await s.del(`/bot_users/${bot.id}`, { token: bot.token }), 403, 'ERR_SERVICE_211');
  });

  it('manages its own keys and credentials, and other resources', async () => {
    const key = await s.post('/api_keys', { description: 'rotated' }, { token: bot.token });
    expect(key.body.owner_id).toBe(bot.id);
    expect((await s.patch(`/api_keys/${key.body.id}`, { description: 'r2' }, { token: bot.token })).status).toBe(200);
    expect((await s.del(`/api_keys/${key.body.id}`, { token: bot.token })).status).toBe(204);
    const cred = await s.post('/credentials', {}, { token: bot.token });
    expect((await s.patch(`/credentials/${cred.body.id}`, { acl: ['bind:app=web'] }, { token: bot.token })).status).toBe(200);
    expect((await s.del(`/credentials/${cred.body.id}`, { token: bot.token })).status).toBe(204);
    expect((await s.post('/ip_policies', { description: 'by a bot' }, { token: bot.token })).status).toBe(201);
  });

  it('its last key may go: only the admin user\'s last key is kept', async () => {
    const b = await s.post('/bot_users', { name: 'short-lived' });
    const only = await s.post('/api_keys', { owner_id: b.body.id });
    expect((await s.del(`/api_keys/${only.body.id}`)).status).toBe(204);
  });
});

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the PostgreSQL cases of permissions.test.ts: initdb is not on the PATH ***\n');

describe.each([
  { db: 'SQLite', postgres: false },
  ...(available ? [{ db: 'PostgreSQL', postgres: true }] : []),
])('the admin user\'s last API key ($db)', ({ postgres }) => {
  let s: TestServer;
  let pg: { url(db: string): string; createDatabase(name: string): Promise<string>; stop(): void } | undefined;
  let adminId: string;
  beforeAll(async () => {
    if (postgres) pg = await startPostgres();
    s = await startTestServer(pg ? { databaseUrl: await pg.createDatabase('perms') } : {});
    adminId = s.server.bootstrap.userId!;
  });
  afterAll(async () => {
    await s?.close();
    pg?.stop();
  });

  let token: string;
  const adminKeys = async () => (await s.get('/api_keys', { token })).body.keys.filter((k: { owner_id: string }) => k.owner_id === adminId);

  it('is refused with 409, naming the way out; any other may go', async () => {
    token = s.token;
    const [only] = await adminKeys();
    const r = expectError(await s.del(`/api_keys/${only.id}`, { token }), 409, 'ERR_SERVICE_327');
    expect(r.msg).toContain('edgeform admin create-key');
    const second = await s.post('/api_keys', { description: 'second' }, { token });
    expect((await s.del(`/api_keys/${only.id}`, { token: second.body.token })).status).toBe(204);
    token = second.body.token;
    expectError(await s.del(`/api_keys/${second.body.id}`, { token }), 409, 'ERR_SERVICE_327');
    expect((await s.get('/ip_policies', { token })).status).toBe(200);
  });

  it('two concurrent deletes of the last two keys: one goes, one is refused', async () => {
    for (let round = 0; round < 5; round++) {
      const [held] = await adminKeys();
      const extra = await s.post('/api_keys', { description: `race ${round}` }, { token });
      // Each delete authenticates with the key it deletes, so neither can lose its own caller.
      const pair = [{ id: held.id, token }, { id: extra.body.id, token: extra.body.token }];
      const results = await Promise.all(pair.map((k) => s.del(`/api_keys/${k.id}`, { token: k.token })));
      expect(results.map((r) => r.status).sort()).toEqual([204, 409]);
      token = pair[results.findIndex((r) => r.status === 409)].token;
      expect(await adminKeys()).toHaveLength(1);
    }
  });
});

describe('edgeform admin create-key', () => {
  let s: TestServer;
  beforeAll(async () => { s = await startTestServer(); });
  afterAll(async () => { await s.close(); });

  it('prints a new admin token while the server runs: the way back in with shell access', async () => {
    const r = await runCli(['admin', 'create-key', '--data-dir', s.dir, '--description', 'recovery']);
    expect(r.code).toBe(0);
    const token = r.stdout.trim();
    expect(token).toMatch(/^[0-9A-Za-z]{43}$/);
    expect(r.stderr).toContain('Created API key ak_');
    expect(r.stderr).not.toContain(token);
    // The key is the admin user's: it may do what only an admin may.
    expect((await s.post('/bot_users', { name: 'made-by-recovered-key' }, { token })).status).toBe(201);
    const listed = (await s.get('/api_keys', { token })).body.keys.find((k: { description: string }) => k.description === 'recovery');
    expect(listed.owner_id).toBe(s.server.bootstrap.userId);
    expect(listed.token).toBeNull();
  });

  it('--json prints the created key with its token', async () => {
    const r = await runCli(['admin', 'create-key', '--data-dir', s.dir, '--json']);
    expect(r.code).toBe(0);
    const body = r.json();
    expect(body.id).toMatch(/^ak_/);
    expect(body.owner_id).toBe(s.server.bootstrap.userId);
    expect((await s.get('/ip_policies', { token: body.token })).status).toBe(200);
  });

  it('a data folder with no database is an error naming the settings, not a new empty database', async () => {
    const r = await runCli(['admin', 'create-key', '--data-dir', `${s.dir}/nowhere`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no database at .*--data-dir/);
  });
});
