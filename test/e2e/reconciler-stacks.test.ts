// Stacks cannot touch each other: every directory names its stack (edgeform.yaml beside
// its manifests, or --stack), a bot user carries a stamp like every other kind, a plan
// counts what the server deletes along with what it deletes, and --prune and destroy are
// refused on the implicit stack every directory shares. Real `edgeform` processes against
// a real server, as two teams' pipelines would run them.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

/** A team's directory: a bot, its API key (token kept in a file) and a policy, named `stack`. */
function teamDir(stack: string | undefined, extra: Doc[] = []): string {
  const files: Record<string, string> = {
    'bots.yaml': toYaml([
      { kind: 'BotUser', name: 'ci' },
      { kind: 'APIKey', name: 'ci-key', description: `${stack} ci`, owner_id: 'BotUser/ci', token_file: 'secrets/ci.token' },
      { kind: 'IPPolicy', name: 'office', description: `${stack} office` },
      ...extra,
    ]),
  };
  if (stack) files['edgeform.yaml'] = `# this directory's stack\nstack: ${stack}\n`;
  return manifestDir(files);
}

// Each test starts several edgeform processes (tsx compiles on start): seconds each on a loaded machine.
describe('reconciler: stacks cannot touch each other', { timeout: 240_000 }, () => {
  let s: TestServer;
  let env: Record<string, string | undefined>;
  const edgeform = (args: string[], more: Record<string, string | undefined> = {}) => runCliProcess(args, { ...env, ...more });
  const bots = async () => (await s.get('/bot_users?limit=100')).body.bot_users as Doc[];
  const keys = async () => (await s.get('/api_keys?limit=100')).body.keys as Doc[];

  beforeAll(async () => {
    s = await startTestServer();
    env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, EDGEFORM_STACK: undefined };
  });
  afterAll(async () => {
    await s?.close();
  });

  it("destroy in one team's directory deletes its own bot and key, never the other team's same-named bot, whose key keeps working", async () => {
    const a = teamDir('team-a');
    const b = teamDir('team-b');
    for (const dir of [a, b]) {
      const r = await edgeform(['apply', '-f', dir, '--auto-approve']);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toContain('Apply complete! Resources: 3 added, 0 changed, 0 destroyed.');
    }
    // Each bot carries its stack's stamp.
    const stamped = (await bots()).map((bot) => [bot.name, JSON.parse(bot.metadata).edgeform.stack]).sort();
    expect(stamped).toEqual([['ci', 'team-a'], ['ci', 'team-b']]);
    const tokenB = fs.readFileSync(path.join(b, 'secrets/ci.token'), 'utf8').trim();

    const destroyed = await edgeform(['destroy', '-f', a, '--auto-approve']);
    expect(destroyed.code, destroyed.stdout + destroyed.stderr).toBe(0);
    expect(destroyed.stdout).toContain('Plan: 0 to add, 0 to change, 3 to destroy.');
    expect(destroyed.stdout).toContain('Destroy complete! Resources: 3 destroyed.');
    expect((await bots()).map((bot) => JSON.parse(bot.metadata).edgeform.stack)).toEqual(['team-b']);
    expect((await keys()).filter((k) => k.description === 'team-b ci')).toHaveLength(1);
    // Team B's bot key still authenticates, and team B's plan sees nothing missing.
    expect((await s.get('/ip_policies', { token: tokenB })).status).toBe(200);
    const planB = await edgeform(['plan', '-f', b, '--detailed-exitcode']);
    expect(planB.code, planB.stdout + planB.stderr).toBe(0);
    expect(planB.stdout).toContain('No changes.');
    expect((await edgeform(['destroy', '-f', b, '--auto-approve'])).code).toBe(0);
  });

  it('the destroy count includes what the server deletes with a bot (a key made by hand), listed with the reason', async () => {
    const a = teamDir('cascade');
    expect((await edgeform(['apply', '-f', a, '--auto-approve'])).code).toBe(0);
    const bot = (await bots()).find((x) => JSON.parse(x.metadata).edgeform.stack === 'cascade')!;
    const byHand = (await s.post('/api_keys', { owner_id: bot.id, description: 'made by hand' })).body;
    const plan = await edgeform(['destroy', '-f', a]);
    // No terminal: refused, but the plan is shown first.
    expect(plan.stdout).toContain(`# APIKey/${byHand.id} will be destroyed (the server deletes it with BotUser/ci)`);
    expect(plan.stdout).toContain('Plan: 0 to add, 0 to change, 4 to destroy.');
    const json = await edgeform(['destroy', '-f', a, '--auto-approve', '--json']);
    expect(json.code, json.stdout + json.stderr).toBe(0);
    const doc = json.json();
    expect(doc.summary.destroy).toBe(4);
    expect(doc.resource_changes.find((c: Doc) => c.id === byHand.id)).toMatchObject({ deleted_with: 'BotUser/ci', change: { actions: ['delete'] } });
    expect(doc.applied.destroy).toBe(4);
    expect((await s.get(`/api_keys/${byHand.id}`)).status).toBe(404);
  });

  it("a delete that would take another stack's resource with it is refused, naming both; nothing is deleted", async () => {
    const a = teamDir('owner');
    expect((await edgeform(['apply', '-f', a, '--auto-approve'])).code).toBe(0);
    const bot = (await bots()).find((x) => JSON.parse(x.metadata).edgeform.stack === 'owner')!;
    // Another team's key, owned by this team's bot through its raw id.
    const other = manifestDir({ 'key.yaml': toYaml([{ kind: 'APIKey', name: 'borrowed', description: 'borrowed', owner_id: bot.id }]), 'edgeform.yaml': 'stack: borrower\n' });
    expect((await edgeform(['apply', '-f', other, '--auto-approve'])).code).toBe(0);
    const refused = await edgeform(['destroy', '-f', a, '--auto-approve']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('deleting BotUser/ci deletes APIKey ak_');
    expect(refused.stderr).toContain('which stack "borrower" manages as APIKey/borrowed; a stack deletes only its own resources');
    expect((await s.get(`/bot_users/${bot.id}`)).status).toBe(200);
    expect((await edgeform(['destroy', '-f', other, '--auto-approve'])).code).toBe(0);
    expect((await edgeform(['destroy', '-f', a, '--auto-approve'])).code).toBe(0);
  });

  it('--prune and destroy are refused on a stack nobody named (usage error, exit 2), saying how to name it; nothing is deleted', async () => {
    const a = teamDir(undefined);
    const applied = await edgeform(['apply', '-f', a, '--auto-approve']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    const b = manifestDir({ 'b.yaml': toYaml([{ kind: 'IPPolicy', name: 'lab' }]) });
    for (const args of [['plan', '-f', b, '--prune'], ['apply', '-f', b, '--prune', '--auto-approve'], ['destroy', '-f', b, '--auto-approve']]) {
      const r = await edgeform(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('on the implicit stack "default", which every directory shares, would delete what runs over other directories applied; name the stack: put "stack: NAME" in an edgeform.yaml beside the manifests, or pass --stack NAME (or set EDGEFORM_STACK)');
    }
    // With --detailed-exitcode, 2 means changes: the usage error is 1 there.
    expect((await edgeform(['plan', '-f', b, '--prune', '--detailed-exitcode'])).code).toBe(1);
    expect((await s.get('/ip_policies?limit=100')).body.ip_policies.map((p: Doc) => p.description)).toContain('undefined office');
    // A plain plan and apply on the default stack still work.
    expect((await edgeform(['plan', '-f', a])).code).toBe(0);
    expect((await edgeform(['destroy', '-f', a, '--auto-approve', '--stack', 'default'])).code).toBe(0);
  });

  it('--stack and edgeform.yaml must agree; two stack files naming two stacks is an error; edgeform.yaml is not a manifest', async () => {
    const a = teamDir('payments');
    const conflict = await edgeform(['plan', '-f', a, '--stack', 'billing']);
    expect(conflict.code).toBe(2);
    expect(conflict.stderr).toContain(`--stack (or EDGEFORM_STACK) names stack "billing", but ${path.join(a, 'edgeform.yaml')} names stack "payments"`);
    expect((await edgeform(['plan', '-f', a], { EDGEFORM_STACK: 'billing' })).code).toBe(2);
    const b = teamDir('search');
    const two = await edgeform(['plan', '-f', a, '-f', b]);
    expect(two.code).toBe(1);
    expect(two.stderr).toContain(`${path.join(a, 'edgeform.yaml')} names stack "payments" and ${path.join(b, 'edgeform.yaml')} names stack "search"; one run manages one stack`);
    const valid = await edgeform(['validate', '-f', a]);
    expect(valid.stdout).toContain('Success! 3 documents valid.');
    const bad = manifestDir({ 'x.yaml': '', 'edgeform.yaml': 'stack: payments\nprune: true\n' });
    const badRun = await edgeform(['plan', '-f', bad]);
    expect(badRun.code).toBe(1);
    expect(badRun.stderr).toContain(`${path.join(bad, 'edgeform.yaml')}:2: unknown key "prune"; an edgeform.yaml has one key, stack`);
  });

  it('a bot no stack stamped (made by hand, or by an edgeform before bots had metadata) is taken over only with --adopt', async () => {
    const legacy = (await s.post('/bot_users', { name: 'deployer' })).body;
    const dir = manifestDir({ 'bot.yaml': toYaml([{ kind: 'BotUser', name: 'deployer' }]), 'edgeform.yaml': 'stack: legacy\n' });
    const plan = await edgeform(['plan', '-f', dir]);
    expect(plan.code).toBe(1);
    expect(plan.stderr).toContain(`BotUser/deployer: name deployer belongs to ${legacy.id}, which edgeform does not manage; pass --adopt to take it over`);
    const adopted = await edgeform(['apply', '-f', dir, '--adopt', '--auto-approve']);
    expect(adopted.code, adopted.stdout + adopted.stderr).toBe(0);
    expect(JSON.parse((await s.get(`/bot_users/${legacy.id}`)).body.metadata).edgeform).toMatchObject({ stack: 'legacy', name: 'BotUser/deployer' });
    expect((await edgeform(['destroy', '-f', dir, '--auto-approve'])).code).toBe(0);
    expect((await s.get(`/bot_users/${legacy.id}`)).status).toBe(404);
  });
});
