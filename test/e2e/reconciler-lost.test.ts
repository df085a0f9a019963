// What is lost must show: a key whose token_file was never written is replaced (its token
// cannot be read back), a resource deleted by hand is drift in plan --refresh-only, and a
// stack's resource of a kind no manifest declares any more is a leftover that plan lists
// and --detailed-exitcode reports with 3. Real `edgeform` processes against a real server.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { NO_CHANGES, toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

// Each test starts several edgeform processes (tsx compiles on start): seconds each on a loaded machine.
describe('reconciler: what is lost must show', { timeout: 240_000 }, () => {
  let s: TestServer;
  let env: Record<string, string | undefined>;
  const edgeform = (args: string[]) => runCliProcess(args, env);

  beforeAll(async () => {
    s = await startTestServer();
    env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, EDGEFORM_STACK: undefined };
  });
  afterAll(async () => {
    await s?.close();
  });

  it('a key or credential whose token_file does not exist (an apply cut off before writing it) plans as a replacement, saying why; apply writes a new token', async () => {
    const dir = manifestDir({
      'edgeform.yaml': 'stack: tokens\n',
      'keys.yaml': toYaml([
        { kind: 'APIKey', name: 'ci', description: 'ci', token_file: 'secrets/ci.token' },
        { kind: 'Credential', name: 'agent', description: 'agent', token_file: 'secrets/agent.token' },
        { kind: 'APIKey', name: 'kept', description: 'kept', token_file: 'secrets/kept.token' },
      ]),
    });
    expect((await edgeform(['apply', '-f', dir, '--auto-approve'])).code).toBe(0);
    const file = (name: string) => path.join(dir, 'secrets', `${name}.token`);
    const oldKey = (await s.get('/api_keys?limit=100')).body.keys.find((k: Doc) => k.description === 'ci');
    // As if the apply had been killed between each create and its write.
    fs.rmSync(file('ci'));
    fs.rmSync(file('agent'));
    const plan = await edgeform(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.code, plan.stdout + plan.stderr).toBe(2);
    expect(plan.stdout).toContain('# APIKey/ci must be replaced');
    expect(plan.stdout).toContain(`# token_file ${file('ci')} does not exist: the token cannot be recovered, so the key is replaced`);
    expect(plan.stdout).toContain('# Credential/agent must be replaced');
    expect(plan.stdout).toContain(`# token_file ${file('agent')} does not exist: the token cannot be recovered, so the key is replaced`);
    expect(plan.stdout).not.toContain('APIKey/kept');
    expect(plan.stdout).toContain('Plan: 2 to add, 0 to change, 2 to destroy.');
    const json = (await edgeform(['plan', '-f', dir, '--json'])).json();
    const ci = json.resource_changes.find((c: Doc) => c.address === 'APIKey/ci');
    expect(ci).toMatchObject({ id: oldKey.id, token_file: file('ci'), replace_reason: expect.stringContaining('does not exist') });
    expect(ci.change.actions).toEqual(['create', 'delete']);

    const applied = await edgeform(['apply', '-f', dir, '--auto-approve']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(applied.stdout).toContain(`token written to ${file('ci')}`);
    const token = fs.readFileSync(file('ci'), 'utf8').trim();
    expect((await s.get('/ip_policies', { token })).status).toBe(200);
    expect((await s.get(`/api_keys/${oldKey.id}`)).status).toBe(404);
    expect(fs.readFileSync(file('agent'), 'utf8').trim()).toMatch(/^\w{20,}$/);
    const after = await edgeform(['plan', '-f', dir, '--detailed-exitcode']);
    expect(after.code, after.stdout).toBe(0);
    expect(after.stdout).toContain(NO_CHANGES);
  });

  it('plan --refresh-only reports a resource deleted by hand (and a route), as Terraform reports "has been deleted"', async () => {
    const dir = manifestDir({
      'edgeform.yaml': 'stack: refresh\n',
      'web.yaml': toYaml([
        { kind: 'IPPolicy', name: 'office', description: 'office' },
        { kind: 'HTTPResponseBackend', name: 'hello', body: 'hello' },
        {
          kind: 'HTTPSEdge',
          name: 'web',
          hostports: ['refresh.example.com:443'],
          routes: ['/', '/api'].map((match) => ({ match_type: 'path_prefix', match, backend: { backend_id: 'HTTPResponseBackend/hello' } })),
        },
      ]),
    });
    expect((await edgeform(['apply', '-f', dir, '--auto-approve'])).code).toBe(0);
    const clean = await edgeform(['plan', '-f', dir, '--refresh-only', '--detailed-exitcode']);
    expect(clean.code, clean.stdout).toBe(0);
    const policy = (await s.get('/ip_policies?limit=100')).body.ip_policies.find((p: Doc) => p.description === 'office');
    const edge = (await s.get('/edges/https?limit=100')).body.https_edges.find((e: Doc) => e.hostports[0] === 'refresh.example.com:443');
    expect((await s.del(`/ip_policies/${policy.id}`)).status).toBe(204);
    expect((await s.del(`/edges/https/${edge.id}/routes/${edge.routes[1].id}`)).status).toBe(204);

    const plan = await edgeform(['plan', '-f', dir, '--refresh-only', '--detailed-exitcode']);
    expect(plan.code, plan.stdout + plan.stderr).toBe(2);
    expect(plan.stdout).toContain('Objects have changed outside edgeform');
    expect(plan.stdout).toContain('# IPPolicy/office has been deleted (not found: deleted outside edgeform, or never applied)');
    expect(plan.stdout).toContain('# HTTPSEdge/web.routes["/api"] has been deleted');
    expect(plan.stdout).not.toContain('HTTPSEdge/web.routes["/"]');
    const json = (await edgeform(['plan', '-f', dir, '--refresh-only', '--json'])).json();
    expect(json.resource_changes.map((c: Doc) => [c.address, c.change.actions, c.drift, c.deleted_outside])).toEqual([
      ['IPPolicy/office', ['delete'], true, true],
      ['HTTPSEdge/web.routes["/api"]', ['delete'], true, true],
    ]);
    expect(json.resource_changes[0].change.before).toMatchObject({ description: 'office' });
    // apply puts them back; then nothing is reported.
    expect((await edgeform(['apply', '-f', dir, '--auto-approve'])).code).toBe(0);
    expect((await edgeform(['plan', '-f', dir, '--refresh-only', '--detailed-exitcode'])).code).toBe(0);
  });

  it('a resource of a kind no manifest declares any more is a leftover: listed (every kind is read), and --detailed-exitcode exits 3', async () => {
    const docs = [
      { kind: 'IPPolicy', name: 'office', description: 'leftover test' },
      { kind: 'TCPEdge', name: 'db', hostports: ['db.example.com:5432'] },
      { kind: 'BotUser', name: 'deployer' },
    ];
    const dir = manifestDir({ 'edgeform.yaml': 'stack: leftovers\n', 'all.yaml': toYaml(docs) });
    expect((await edgeform(['apply', '-f', dir, '--auto-approve'])).code).toBe(0);
    // Only the policy stays declared: no TCP edge and no bot user is declared anywhere.
    fs.writeFileSync(path.join(dir, 'all.yaml'), toYaml([docs[0]]));
    const plan = await edgeform(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.code, plan.stdout + plan.stderr).toBe(3);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.stdout).toContain('2 resources are managed by stack "leftovers" but no longer declared: BotUser/deployer, TCPEdge/db.');
    expect(plan.stdout).toContain('Run with --prune to delete them, or declare them again.');
    const json = (await edgeform(['plan', '-f', dir, '--json'])).json();
    expect(json.orphans).toEqual(['BotUser/deployer', 'TCPEdge/db']);
    expect(json.changes).toBe(false);
    // Changes win over leftovers: 2, since apply has something to do.
    fs.writeFileSync(path.join(dir, 'all.yaml'), toYaml([{ ...docs[0], description: 'changed' }]));
    expect((await edgeform(['plan', '-f', dir, '--detailed-exitcode'])).code).toBe(2);
    fs.writeFileSync(path.join(dir, 'all.yaml'), toYaml([docs[0]]));
    // The hostport is still held until --prune frees it.
    expect((await s.get('/edges/tcp?limit=100')).body.tcp_edges.map((e: Doc) => e.hostports[0])).toContain('db.example.com:5432');
    const pruned = await edgeform(['apply', '-f', dir, '--prune', '--auto-approve']);
    expect(pruned.code, pruned.stdout + pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 2 destroyed.');
    expect((await edgeform(['plan', '-f', dir, '--detailed-exitcode'])).code).toBe(0);
  });
});
