// Users, bot users, API keys and tunnel credentials (DECISIONS "Accounts, users, keys").
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, ID, RFC3339, unknownId } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let adminId: string;
beforeAll(async () => {
  s = await startTestServer();
  adminId = s.server.bootstrap.userId!;
});
afterAll(async () => { await s.close(); });

const TOKEN = /^[0-9A-Za-z]{43}$/;

describe('users', () => {
  it('GET /users/{id} reads the admin created on first start', async () => {
    const r = await s.get(`/users/${adminId}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id: adminId, uri: `${s.url}/users/${adminId}`, created_at: expect.stringMatching(RFC3339), name: 'admin', admin: true });
  });

  it('users are read-only and have no list', async () => {
    expectError(await s.patch(`/users/${adminId}`, { name: 'x' }), 405);
    expectError(await s.del(`/users/${adminId}`), 405);
    expectError(await s.get('/users'), 404);
  });

  it('an unknown user is 404, another prefix 400', async () => {
    expectError(await s.get(`/users/${unknownId('usr')}`), 404, 'ERR_SERVICE_300');
    expectError(await s.get(`/users/${unknownId('bot')}`), 400, 'ERR_SERVICE_105');
  });
});

describe('API keys', () => {
  it('returns the token once, on creation, and null in every other response', async () => {
    const created = await s.post('/api_keys', { description: 'ci', metadata: '{"team":"a"}' });
    expect(created.status).toBe(201);
    const { id, token } = created.body;
    expect(id).toMatch(ID);
    expect(id.startsWith('ak_')).toBe(true);
    expect(token).toMatch(TOKEN);
    expect(created.body).toEqual({
      id, uri: `${s.url}/api_keys/${id}`, created_at: expect.stringMatching(RFC3339), description: 'ci', metadata: '{"team":"a"}', owner_id: adminId, token,
    });
    const got = await s.get(`/api_keys/${id}`);
    expect(got.body).toEqual({ ...created.body, token: null });
    const list = await s.get('/api_keys');
    expect(Object.keys(list.body).sort()).toEqual(['keys', 'next_page_uri', 'uri']);
    const listed = list.body.keys.find((k: { id: string }) => k.id === id);
    expect(listed).toEqual({ ...created.body, token: null });
    for (const k of list.body.keys) expect(k.token).toBeNull();
    const patched = await s.patch(`/api_keys/${id}`, { description: 'renamed' });
    expect(patched.body).toEqual({ ...created.body, description: 'renamed', token: null });
    expect(JSON.stringify((await s.get(`/event_destinations`)).body)).not.toContain(token);
  });

  it('a new key authenticates; deleting it revokes it', async () => {
    const created = await s.post('/api_keys', {});
    const token = created.body.token;
    expect((await s.get('/ip_policies', { token })).status).toBe(200);
    const del = await s.del(`/api_keys/${created.body.id}`);
    expect(del.status).toBe(204);
    expectError(await s.get('/ip_policies', { token }), 401, 'ERR_SERVICE_202');
    expectError(await s.get(`/api_keys/${created.body.id}`), 404);
  });

  it('tokens are distinct and stored only as digests', async () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 5; i++) tokens.add((await s.post('/api_keys', {})).body.token);
    expect(tokens.size).toBe(5);
    const files = fs.readdirSync(s.dir).filter((f) => f.startsWith('edgeform.db'));
    const stored = files.map((f) => fs.readFileSync(path.join(s.dir, f)).toString('latin1')).join('');
    for (const t of [...tokens, s.token]) expect(stored).not.toContain(t);
  });

  it('owner_id cannot change (400); PATCH takes description and metadata', async () => {
    const created = await s.post('/api_keys', {});
    const r = await s.patch(`/api_keys/${created.body.id}`, { owner_id: adminId });
    expectInvalid(r, 'owner_id', 'ERR_SERVICE_106');
    expectInvalid(await s.patch(`/api_keys/${created.body.id}`, { token: 'x' }), 'token', 'ERR_SERVICE_102');
  });

  it.each([
    { reason: 'an owner that does not exist', owner: unknownId('usr'), status: 400, code: 'ERR_SERVICE_107' as const },
    { reason: 'a bot that does not exist', owner: unknownId('bot'), status: 400, code: 'ERR_SERVICE_107' as const },
    { reason: 'an id that is not a user or bot', owner: unknownId('ipp'), status: 400, code: 'ERR_SERVICE_103' as const },
    { reason: 'not a string', owner: 42, status: 400, code: 'ERR_SERVICE_103' as const },
  ])('an admin naming $reason as owner: $status', async ({ owner, status, code }) => {
    const r = await s.post('/api_keys', { owner_id: owner });
    const body = expectError(r, status, code);
    expect(body.details.field).toBe('owner_id');
  });

  it('an admin may create a key for a bot, which then authenticates as the bot', async () => {
    const bot = await s.post('/bot_users', { name: 'deployer' });
    const key = await s.post('/api_keys', { owner_id: bot.body.id });
    expect(key.status).toBe(201);
    expect(key.body.owner_id).toBe(bot.body.id);
    const own = await s.post('/api_keys', {}, { token: key.body.token });
    expect(own.status).toBe(201);
    expect(own.body.owner_id).toBe(bot.body.id);
    const named = await s.post('/api_keys', { owner_id: bot.body.id }, { token: key.body.token });
    expect(named.status).toBe(201);
  });

  it('a non-admin naming another owner: 403', async () => {
    const bot = await s.post('/bot_users', { name: 'limited' });
    const key = await s.post('/api_keys', { owner_id: bot.body.id });
    const other = await s.post('/bot_users', { name: 'other' });
    for (const owner of [adminId, other.body.id, unknownId('usr')]) {
      const r = await s.post('/api_keys', { owner_id: owner }, { token: key.body.token });
      const body = expectError(r, 403, 'ERR_SERVICE_211');
      expect(body.details.field).toBe('owner_id');
      expect(body.msg).toMatch(/admin/);
    }
  });
});

describe('bot users', () => {
  it('full CRUD', async () => {
    const created = await s.post('/bot_users', { name: 'ci-bot' });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(id.startsWith('bot_')).toBe(true);
    expect(created.body).toEqual({ id, uri: `${s.url}/bot_users/${id}`, created_at: expect.stringMatching(RFC3339), name: 'ci-bot', active: true, metadata: '' });
    expect((await s.get(`/bot_users/${id}`)).body).toEqual(created.body);
    const list = await s.get('/bot_users');
    expect(list.body.bot_users.map((b: { id: string }) => b.id)).toContain(id);
    const patched = await s.patch(`/bot_users/${id}`, { name: 'ci', active: false });
    expect(patched.body).toEqual({ ...created.body, name: 'ci', active: false });
    expect((await s.del(`/bot_users/${id}`)).status).toBe(204);
    expectError(await s.get(`/bot_users/${id}`), 404);
  });

  it.each([
    { reason: 'no name', body: {}, field: 'name' },
    { reason: 'an empty name', body: { name: '' }, field: 'name' },
    { reason: 'a name over 255 characters', body: { name: 'b'.repeat(256) }, field: 'name' },
    { reason: 'active not a boolean', body: { name: 'x', active: 'yes' }, field: 'active' },
    { reason: 'an admin flag', body: { name: 'x', admin: true }, field: 'admin' },
  ])('refuses $reason', async ({ body, field }) => {
    const r = await s.post('/bot_users', body);
    expect(r.status).toBe(400);
    expect(r.body.details.field).toBe(field);
  });

  it('an inactive bot\'s keys are refused with 401 until it is active again', async () => {
    const bot = await s.post('/bot_users', { name: 'sleepy' });
    const key = await s.post('/api_keys', { owner_id: bot.body.id });
    expect((await s.get('/ip_policies', { token: key.body.token })).status).toBe(200);
    await s.patch(`/bot_users/${bot.body.id}`, { active: false });
    const r = await s.get('/ip_policies', { token: key.body.token });
    expectError(r, 401, 'ERR_SERVICE_203');
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
    await s.patch(`/bot_users/${bot.body.id}`, { active: true });
    expect((await s.get('/ip_policies', { token: key.body.token })).status).toBe(200);
  });

  it('a bot created inactive cannot authenticate', async () => {
    const bot = await s.post('/bot_users', { name: 'off', active: false });
    const key = await s.post('/api_keys', { owner_id: bot.body.id });
    expectError(await s.get('/ip_policies', { token: key.body.token }), 401, 'ERR_SERVICE_203');
  });

  it('deleting a bot deletes its keys and credentials', async () => {
    const bot = await s.post('/bot_users', { name: 'doomed' });
    const k1 = await s.post('/api_keys', { owner_id: bot.body.id });
    const k2 = await s.post('/api_keys', {}, { token: k1.body.token });
    const cred = await s.post('/credentials', {}, { token: k1.body.token });
    expect(cred.body.owner_id).toBe(bot.body.id);
    expect((await s.del(`/bot_users/${bot.body.id}`)).status).toBe(204);
    for (const k of [k1, k2]) {
      expectError(await s.get(`/api_keys/${k.body.id}`), 404);
      expectError(await s.get('/ip_policies', { token: k.body.token }), 401);
    }
    expectError(await s.get(`/credentials/${cred.body.id}`), 404);
  });

  it('a bot is never an admin: its key cannot create keys or credentials for others', async () => {
    const bot = await s.post('/bot_users', { name: 'plain' });
    const key = await s.post('/api_keys', { owner_id: bot.body.id });
    expectError(await s.post('/credentials', { owner_id: adminId }, { token: key.body.token }), 403, 'ERR_SERVICE_211');
    // A bot may still manage other resources (bots themselves are an admin's: permissions.test.ts).
    expect((await s.post('/ip_policies', { description: 'by a bot' }, { token: key.body.token })).status).toBe(201);
  });
});

describe('credentials', () => {
  it('full CRUD, token once', async () => {
    const created = await s.post('/credentials', { description: 'agent', acl: ['bind:*.example.com'] });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(id.startsWith('cr_')).toBe(true);
    expect(created.body).toEqual({
      id, uri: `${s.url}/credentials/${id}`, created_at: expect.stringMatching(RFC3339), description: 'agent', metadata: '', token: expect.stringMatching(TOKEN), acl: ['bind:*.example.com'], owner_id: adminId,
    });
    const readBack = { ...created.body, token: null };
    expect((await s.get(`/credentials/${id}`)).body).toEqual(readBack);
    const list = await s.get('/credentials');
    expect(list.body.credentials.find((c: { id: string }) => c.id === id)).toEqual(readBack);
    const patched = await s.patch(`/credentials/${id}`, { acl: [], metadata: 'm' });
    expect(patched.body).toEqual({ ...readBack, acl: [], metadata: 'm' });
    expect((await s.del(`/credentials/${id}`)).status).toBe(204);
    expectError(await s.get(`/credentials/${id}`), 404);
  });

  it('a credential token is not an API key', async () => {
    const created = await s.post('/credentials', {});
    expectError(await s.get('/ip_policies', { token: created.body.token }), 401, 'ERR_SERVICE_202');
  });

  it('owner rules are those of API keys', async () => {
    const bot = await s.post('/bot_users', { name: 'cred-owner' });
    const forBot = await s.post('/credentials', { owner_id: bot.body.id });
    expect(forBot.body.owner_id).toBe(bot.body.id);
    expectInvalid(await s.post('/credentials', { owner_id: unknownId('bot') }), 'owner_id', 'ERR_SERVICE_107');
    expectInvalid(await s.patch(`/credentials/${forBot.body.id}`, { owner_id: adminId }), 'owner_id', 'ERR_SERVICE_106');
  });

  it.each([
    { reason: 'acl not a list', body: { acl: 'bind:x' }, field: 'acl' },
    { reason: 'an empty acl entry', body: { acl: [''] }, field: 'acl[0]' },
  ])('refuses $reason', async ({ body, field }) => {
    expectInvalid(await s.post('/credentials', body), field);
  });
});
