// edgeform never removes the API key it authenticates with: not by destroy or --prune once
// the key was adopted into a stack, not by a replacement, not by deleting the bot that owns
// it (which deletes its keys), not by deactivating that bot, not from a saved plan applied with that key. The server names
// the key on every authenticated response (Service-Api-Key-Id). The plan is refused, naming
// the key and what to do; another key makes the same change.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { activeChanges, stackRunner, toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

/** A bot with a key of its own, the key stamped into stack "bots" as APIKey/ci-key (as adoption does). */
async function botWithKey(s: TestServer) {
  // Stamped into stack "bots" as if applied there: a bot carries a stamp like any other kind.
  const bot = (await s.post('/bot_users', { name: 'ci', metadata: JSON.stringify({ edgeform: { stack: 'bots', name: 'BotUser/ci' } }) })).body;
  const key = (await s.post('/api_keys', { owner_id: bot.id, description: 'ci key' })).body;
  expect(key.token).toEqual(expect.any(String));
  expect((await s.patch(`/api_keys/${key.id}`, { metadata: JSON.stringify({ edgeform: { stack: 'bots', name: 'APIKey/ci-key' } }) })).status).toBe(200);
  const dir = manifestDir({
    'bots.yaml': toYaml([
      { kind: 'BotUser', name: 'ci' },
      { kind: 'APIKey', name: 'ci-key', description: 'ci key', owner_id: 'BotUser/ci' },
    ]),
  });
  return { bot, key, token: key.token as string, dir };
}

describe('reconciler: the API key it authenticates with', () => {
  const servers: TestServer[] = [];
  const start = async () => {
    const s = await startTestServer();
    servers.push(s);
    return s;
  };
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const exists = async (s: TestServer, id: string) => (await s.get(`/api_keys/${id}`)).status === 200;

  it('the server names the key that authenticated each request', async () => {
    const s = await start();
    const [admin] = (await s.get('/api_keys')).body.keys;
    const { key, token } = await botWithKey(s);
    expect((await s.get('/ip_policies')).headers.get('service-api-key-id')).toBe(admin.id);
    expect((await s.get('/ip_policies', { token })).headers.get('service-api-key-id')).toBe(key.id);
    // An error after authentication names it too; a refused credential names nothing.
    expect((await s.get('/ip_policies/ipp_nothing', { token })).headers.get('service-api-key-id')).toBe(key.id);
    expect((await s.get('/ip_policies', { token: 'not-a-key' })).headers.get('service-api-key-id')).toBeNull();
  });

  it('adopted into a stack: destroy and --prune refuse to delete it, and another key deletes it', async () => {
    const s = await start();
    const r = stackRunner(s, { EDGEFORM_STACK: 'keys' });
    const [admin] = (await s.get('/api_keys')).body.keys;
    const out = path.join(manifestDir({}), 'keys.yaml');
    const exported = await r.run(['export', '--adopt', '--kind', 'APIKey', '-o', out]);
    expect(exported.code, exported.stderr).toBe(0);
    const name = fs.readFileSync(out, 'utf8').match(/^name: (\S+)$/m)![1];
    const dir = path.dirname(out);
    const refusal = `APIKey/${name} is the API key this command authenticates with (${admin.id}): deleting it would lock this run, and everyone using the key, out; authenticate with another API key (EDGEFORM_API_KEY or --api-key) to delete it, or keep it declared in the manifests`;

    const destroy = await r.run(['destroy', '-f', dir, '--auto-approve']);
    expect(destroy.code).toBe(1);
    expect(destroy.stderr).toBe(`Error: cannot destroy:\n  ${refusal}\n`);

    const other = manifestDir({ 'policy.yaml': toYaml([{ kind: 'IPPolicy', name: 'office' }]) });
    const prune = await r.run(['apply', '-f', other, '--prune', '--auto-approve']);
    expect(prune.code).toBe(1);
    expect(prune.stderr).toBe(`Error: the plan cannot be carried out:\n  ${refusal}\n`);
    const plan = await r.run(['plan', '-f', other, '--prune', '--json']);
    expect(plan.code).toBe(1);
    expect(plan.json().error).toContain(refusal);
    // Nothing ran: the policy was not created either, and the key works.
    expect((await s.get('/ip_policies')).body.ip_policies).toEqual([]);
    expect(await exists(s, admin.id)).toBe(true);

    // With another key (an admin's, made for the purpose) the same destroy deletes it.
    const second = (await s.post('/api_keys', { description: 'second admin key' })).body;
    const withSecond = await r.run(['destroy', '-f', dir, '--auto-approve'], { EDGEFORM_API_KEY: second.token });
    expect(withSecond.code, withSecond.stdout + withSecond.stderr).toBe(0);
    expect(withSecond.stdout).toContain('Destroy complete! Resources: 1 destroyed.');
    expect((await s.get(`/api_keys/${admin.id}`, { token: second.token })).status).toBe(404);
  });

  it('a change that replaces it (a new owner) is refused, naming the field', async () => {
    const s = await start();
    const r = stackRunner(s, { EDGEFORM_STACK: 'keys' });
    const [admin] = (await s.get('/api_keys')).body.keys;
    const out = path.join(manifestDir({}), 'keys.yaml');
    expect((await r.run(['export', '--adopt', '--kind', 'APIKey', '-o', out])).code).toBe(0);
    const name = fs.readFileSync(out, 'utf8').match(/^name: (\S+)$/m)![1];
    fs.writeFileSync(out, `${fs.readFileSync(out, 'utf8').replace(/^owner_id: .*$/m, 'owner_id: BotUser/ci')}---\n${toYaml([{ kind: 'BotUser', name: 'ci' }])}`);
    const apply = await r.run(['apply', '-f', path.dirname(out), '--auto-approve']);
    expect(apply.code).toBe(1);
    expect(apply.stderr).toContain(`changing owner_id replaces APIKey/${name}, the API key this command authenticates with (${admin.id}): the old key would be deleted and this run locked out; undo the change, or authenticate with another API key`);
    expect((await s.get('/bot_users')).body.bot_users).toEqual([]);
    expect(await exists(s, admin.id)).toBe(true);
  });

  it("a bot's own key: deleting the bot would delete the key, so destroy with that key is refused; with another key it runs", async () => {
    const s = await start();
    const { bot, key, token, dir } = await botWithKey(s);
    const bots = stackRunner(s, { EDGEFORM_STACK: 'bots', EDGEFORM_API_KEY: token });
    const destroy = await bots.run(['destroy', '-f', dir, '--auto-approve']);
    expect(destroy.code).toBe(1);
    expect(destroy.stderr).toContain(`deleting BotUser/ci deletes the API key this command authenticates with (${key.id}, whose owner_id it is), locking this run out; authenticate with another API key (EDGEFORM_API_KEY or --api-key) to delete it`);
    expect(destroy.stderr).toContain(`APIKey/ci-key is the API key this command authenticates with (${key.id})`);
    expect(await exists(s, key.id)).toBe(true);
    // The admin's key deletes both.
    const admin = await stackRunner(s, { EDGEFORM_STACK: 'bots' }).run(['destroy', '-f', dir, '--auto-approve']);
    expect(admin.code, admin.stdout + admin.stderr).toBe(0);
    expect((await s.get(`/bot_users/${bot.id}`)).status).toBe(404);
    expect(await exists(s, key.id)).toBe(false);
  });

  it("a bot's own key: deactivating the bot stops the key, so that apply is refused; with another key it runs", async () => {
    const s = await start();
    const { bot, key, token } = await botWithKey(s);
    const dir = manifestDir({
      'bots.yaml': toYaml([
        { kind: 'BotUser', name: 'ci', active: false },
        { kind: 'APIKey', name: 'ci-key', description: 'ci key', owner_id: 'BotUser/ci' },
      ]),
    });
    const bots = stackRunner(s, { EDGEFORM_STACK: 'bots', EDGEFORM_API_KEY: token });
    const refused = await bots.run(['apply', '-f', dir, '--auto-approve']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`BotUser/ci owns the API key this command authenticates with (${key.id}): deactivating it would lock this run, and everyone using the key, out; authenticate with another API key (EDGEFORM_API_KEY or --api-key) to deactivate it`);
    expect((await s.get(`/bot_users/${bot.id}`)).body.active).toBe(true);
    const admin = await stackRunner(s, { EDGEFORM_STACK: 'bots' }).run(['apply', '-f', dir, '--auto-approve']);
    expect(admin.code, admin.stdout + admin.stderr).toBe(0);
    expect((await s.get(`/bot_users/${bot.id}`)).body.active).toBe(false);
  });

  it("a bot's own key in no stack: pruning the bot, whose kind and the key's the manifests no longer declare, is refused", async () => {
    const s = await start();
    const bot = (await s.post('/bot_users', { name: 'ci', metadata: JSON.stringify({ edgeform: { stack: 'bots', name: 'BotUser/ci' } }) })).body;
    const key = (await s.post('/api_keys', { owner_id: bot.id, description: 'made by hand' })).body;
    const dir = manifestDir({ 'policy.yaml': toYaml([{ kind: 'IPPolicy', name: 'office' }] as Doc[]) });
    // The plan reads API keys though no document declares one and none is the stack's: the bot's deletion takes them with it.
    const bots = stackRunner(s, { EDGEFORM_STACK: 'bots', EDGEFORM_API_KEY: key.token });
    const refused = await bots.run(['apply', '-f', dir, '--prune', '--auto-approve']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`deleting BotUser/ci deletes the API key this command authenticates with (${key.id}, whose owner_id it is)`);
    expect((await s.get(`/bot_users/${bot.id}`)).status).toBe(200);
    // The admin's key prunes the bot, and lists the key as going with it.
    const admin = await stackRunner(s, { EDGEFORM_STACK: 'bots' }).planJson(['-f', dir, '--prune']);
    expect(activeChanges(admin)[`APIKey/${key.id}`]).toMatchObject({ change: { actions: ['delete'] } });
  });

  it('a saved plan made with another key is refused when applied with the key it deletes', async () => {
    const s = await start();
    const { key, token } = await botWithKey(s);
    const dir = manifestDir({ 'policy.yaml': toYaml([{ kind: 'IPPolicy', name: 'office' }] as Doc[]) });
    const file = path.join(dir, '..', `${path.basename(dir)}.plan`);
    // Made with the admin's key, the plan deletes the bot's key (no longer declared in stack "bots").
    const made = await stackRunner(s, { EDGEFORM_STACK: 'bots' }).run(['plan', '-f', dir, '--prune', '--out', file]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toContain('# APIKey/ci-key will be destroyed');
    const applied = await stackRunner(s, { EDGEFORM_STACK: 'bots', EDGEFORM_API_KEY: token }).run(['apply', file]);
    expect(applied.code).toBe(1);
    expect(applied.stderr).toContain(`APIKey/ci-key is the API key this command authenticates with (${key.id})`);
    expect(await exists(s, key.id)).toBe(true);
    expect((await s.get('/ip_policies')).body.ip_policies).toEqual([]);
  });
});
