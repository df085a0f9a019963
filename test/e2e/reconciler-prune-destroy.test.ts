// Deletes: without --prune, resources a stack no longer declares are only reported; with
// it, exactly those go, while another stack's and unmanaged resources (created through the
// API directly) stay. prevent_destroy blocks deletion and replacement. destroy deletes what
// the stack manages and nothing else.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { caPem } from '../helpers/edge-fixtures.js';
import { activeChanges, NO_CHANGES, stackRunner, type StackRunner, toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

const CA_1 = caPem('prune test CA 1');
const CA_2 = caPem('prune test CA 2');

/** The default stack's full manifest. */
const mine: Doc[] = [
  { kind: 'IPPolicy', name: 'office', description: 'mine: office', rules: [{ cidr: '10.1.0.0/16', action: 'allow' }] },
  { kind: 'IPPolicy', name: 'old', description: 'mine: old', rules: [{ cidr: '10.2.0.0/16', action: 'deny' }] },
  { kind: 'TunnelGroupBackend', name: 'agents', labels: { app: 'mine' } },
  { kind: 'HTTPResponseBackend', name: 'hello', body: 'mine' },
  { kind: 'CertificateAuthority', name: 'clients', ca_pem: CA_1, prevent_destroy: true },
  { kind: 'BotUser', name: 'mine-bot' },
  {
    kind: 'HTTPSEdge',
    name: 'web',
    hostports: ['mine.example.com:443'],
    routes: [
      { match_type: 'path_prefix', match: '/', backend: { backend_id: 'HTTPResponseBackend/hello' }, ip_restriction: { ip_policy_ids: ['IPPolicy/office'] } },
      { match_type: 'path_prefix', match: '/old', backend: { backend_id: 'TunnelGroupBackend/agents' }, ip_restriction: { ip_policy_ids: ['IPPolicy/old'] } },
    ],
  },
];

/** Another stack's manifest: the same document names, other resources. */
const theirs: Doc[] = [
  { kind: 'IPPolicy', name: 'old', description: 'theirs: old' },
  { kind: 'TunnelGroupBackend', name: 'agents', labels: { app: 'theirs' } },
  { kind: 'HTTPSEdge', name: 'web', hostports: ['theirs.example.com:443'] },
];

describe('reconciler: --prune, prevent_destroy and destroy', () => {
  let s: TestServer;
  let me: StackRunner;
  let other: StackRunner;
  let dir: string;
  let theirDir: string;
  const unmanaged: Record<string, string> = {};

  const write = (docs: Doc[]) => fs.writeFileSync(path.join(dir, 'stack.yaml'), toYaml(docs));
  const list = async (p: string, key: string) => (await s.get(`${p}?limit=100`)).body[key] as Doc[];
  const all = async () => ({
    policies: (await list('/ip_policies', 'ip_policies')).map((p) => p.description).sort(),
    rules: (await list('/ip_policy_rules', 'ip_policy_rules')).map((r) => r.cidr).sort(),
    tunnelBackends: (await list('/backends/tunnel_group', 'backends')).map((b) => b.labels.app).sort(),
    responseBackends: (await list('/backends/http_response', 'backends')).map((b) => b.body).sort(),
    cas: (await list('/certificate_authorities', 'certificate_authorities')).length,
    bots: (await list('/bot_users', 'bot_users')).map((b) => b.name).sort(),
    edges: Object.fromEntries((await list('/edges/https', 'https_edges')).map((e) => [e.hostports[0] ?? e.id, e.routes.map((r: Doc) => r.match)])),
  });

  beforeAll(async () => {
    s = await startTestServer();
    me = stackRunner(s);
    other = stackRunner(s, { EDGEFORM_STACK: 'other' });
    // This directory names its stack beside its manifests; the other one names it with EDGEFORM_STACK.
    dir = manifestDir({ 'stack.yaml': toYaml(mine), 'edgeform.yaml': 'stack: mine\n' });
    theirDir = manifestDir({ 'stack.yaml': toYaml(theirs) });
    await me.apply(['-f', dir]);
    await other.apply(['-f', theirDir]);
    // Made through the API directly: no stack manages them.
    unmanaged.policy = (await s.post('/ip_policies', { description: 'unmanaged' })).body.id;
    await s.post('/ip_policy_rules', { ip_policy_id: unmanaged.policy, cidr: '10.9.0.0/16', action: 'allow' });
    unmanaged.backend = (await s.post('/backends/tunnel_group', { labels: { app: 'unmanaged' } })).body.id;
    unmanaged.edge = (await s.post('/edges/https', { hostports: ['unmanaged.example.com:443'] })).body.id;
    unmanaged.bot = (await s.post('/bot_users', { name: 'unmanaged-bot' })).body.id;
  });
  afterAll(async () => {
    await s?.close();
  });

  const everything = {
    policies: ['mine: office', 'mine: old', 'theirs: old', 'unmanaged'],
    rules: ['10.1.0.0/16', '10.2.0.0/16', '10.9.0.0/16'],
    tunnelBackends: ['mine', 'theirs', 'unmanaged'],
    responseBackends: ['mine'],
    cas: 1,
    bots: ['mine-bot', 'unmanaged-bot'],
    edges: { 'mine.example.com:443': ['/', '/old'], 'theirs.example.com:443': [], 'unmanaged.example.com:443': [] },
  };

  it('starts with both stacks applied and the unmanaged resources beside them', async () => {
    expect(await all()).toEqual(everything);
    for (const r of [me, other]) expect((await r.run(['plan', '-f', r === me ? dir : theirDir])).stdout).toContain(NO_CHANGES);
  });

  it('without --prune, only reports what the stack no longer declares', async () => {
    // The policy "old" and every tunnel-group backend are no longer declared; the route that
    // used them is part of the edge's document, so removing it there deletes it.
    const edge = { ...mine[6], routes: [mine[6].routes[0]] };
    write([mine[0], mine[3], mine[4], mine[5], edge]);
    const plan = await me.run(['plan', '-f', dir]);
    expect(plan.code, plan.stderr).toBe(0);
    // Every kind is read, so the tunnel-group backend, whose kind no document declares any
    // more, is listed too (it was invisible when only the declared kinds were read).
    expect(plan.stdout).toContain('2 resources are managed by stack "mine" but no longer declared: IPPolicy/old, TunnelGroupBackend/agents.');
    expect(plan.stdout).toContain('Run with --prune to delete them, or declare them again.');
    const p = await me.planJson(['-f', dir]);
    expect(Object.fromEntries(Object.entries(activeChanges(p)).map(([a, c]) => [a, c.change.actions]))).toEqual({ 'HTTPSEdge/web.routes["/old"]': ['delete'] });
    expect(p.orphans).toEqual(['IPPolicy/old', 'TunnelGroupBackend/agents']);
    const applied = await me.apply(['-f', dir]);
    expect(applied.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 1 destroyed.');
    expect(await all()).toEqual({ ...everything, edges: { ...everything.edges, 'mine.example.com:443': ['/'] } });
    // No changes, but leftovers: --detailed-exitcode says so with 3, so a drift-watching pipeline notices.
    const after = await me.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(after.stdout).toContain(NO_CHANGES);
    expect(after.code).toBe(3);
  });

  it('with --prune, deletes exactly this stack\'s leftovers: another stack\'s and unmanaged resources survive', async () => {
    const p = await me.planJson(['-f', dir, '--prune']);
    const deletes = Object.fromEntries(Object.entries(activeChanges(p)).map(([a, c]) => [a, c.change.actions]));
    // The rule goes with its policy (no call of its own) and is listed, as Terraform lists each resource it destroys.
    expect(deletes).toEqual({ 'IPPolicy/old': ['delete'], 'IPPolicy/old.rules["10.2.0.0/16"]': ['delete'], 'TunnelGroupBackend/agents': ['delete'] });
    const text = await me.run(['plan', '-f', dir, '--prune']);
    expect(text.stdout).toContain('# IPPolicy/old will be destroyed');
    expect(text.stdout).toContain('# IPPolicy/old.rules["10.2.0.0/16"] will be destroyed');
    expect(text.stdout).toContain('Plan: 0 to add, 0 to change, 3 to destroy.');
    const applied = await me.run(['apply', '-f', dir, '--prune', '--auto-approve']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(applied.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 3 destroyed.');
    expect(applied.stdout).toContain('IPPolicy/old.rules["10.2.0.0/16"]: Destruction complete');
    expect(await all()).toEqual({
      ...everything,
      policies: ['mine: office', 'theirs: old', 'unmanaged'],
      rules: ['10.1.0.0/16', '10.9.0.0/16'],
      tunnelBackends: ['theirs', 'unmanaged'],
      edges: { ...everything.edges, 'mine.example.com:443': ['/'] },
    });
    expect((await me.run(['plan', '-f', dir, '--prune', '--detailed-exitcode'])).code).toBe(0);
    expect((await other.run(['plan', '-f', theirDir, '--detailed-exitcode'])).code).toBe(0);
  });

  it('prevent_destroy blocks a replacement: the plan fails naming the resource, and nothing changes', async () => {
    const ca = { ...mine[4], ca_pem: CA_2 };
    write([mine[0], mine[3], ca, mine[5], { ...mine[6], routes: [mine[6].routes[0]] }]);
    for (const cmd of ['plan', 'apply']) {
      const r = await me.run([cmd, '-f', dir, '--auto-approve'].filter((a) => cmd === 'apply' || a !== '--auto-approve'));
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/CertificateAuthority\/clients has prevent_destroy set, but changing ca_pem replaces it/);
    }
    const json = await me.run(['plan', '-f', dir, '--json']);
    expect(json.code).toBe(1);
    expect(json.json().error).toMatch(/CertificateAuthority\/clients has prevent_destroy set/);
    expect((await all()).cas).toBe(1);
  });

  it('prevent_destroy blocks destroy, naming the resource and where the flag is set; nothing is deleted', async () => {
    write([mine[0], mine[3], mine[4], mine[5], { ...mine[6], routes: [mine[6].routes[0]] }]);
    const before = await all();
    const r = await me.run(['destroy', '-f', dir, '--auto-approve']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/CertificateAuthority\/clients has prevent_destroy set; remove it from .*stack\.yaml:\d+ to delete it/);
    expect(await all()).toEqual(before);
  });

  it('destroy deletes everything the stack manages and nothing else', async () => {
    write([mine[0], mine[3], { ...mine[4], prevent_destroy: false }, mine[5], { ...mine[6], routes: [mine[6].routes[0]] }]);
    const plan = await me.run(['destroy', '-f', dir]);
    expect(plan.code).toBe(1);
    expect(plan.stderr).toContain('--auto-approve');
    // Five documents, and the rule and route that go with their policy and edge.
    expect(plan.stdout).toContain('Plan: 0 to add, 0 to change, 7 to destroy.');
    expect(plan.stdout).toContain('# HTTPSEdge/web.routes["/"] will be destroyed');
    // An unmanaged route sends traffic to the stack's backend: the API refuses to delete it. The
    // destroy carries on with the rest, reports the refusal with its code and operation id,
    // and exits 1; once the reference is gone, destroy again finishes.
    const hello = (await list('/backends/http_response', 'backends'))[0];
    const route = await s.post(`/edges/https/${unmanaged.edge}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: hello.id } });
    expect(route.status).toBe(201);
    const refused = await me.run(['destroy', '-f', dir, '--auto-approve']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^Error: HTTPResponseBackend\/hello: delete failed \(HTTP 409 ERR_SERVICE_\d+\): [^:]+ is still referenced by edghtsrt_\w+; remove those references first \(operation op_\w+\)$/m);
    // Once in full, after the run; as it happens, in brief (it was printed twice in full).
    expect(refused.stdout.match(/is still referenced/g)).toHaveLength(1);
    expect(refused.stdout).toMatch(/^HTTPResponseBackend\/hello: Destruction failed \(HTTP 409 ERR_SERVICE_\d+\)$/m);
    const json = await me.run(['destroy', '-f', dir, '--auto-approve', '--json']);
    expect(json.code).toBe(1);
    expect(json.stderr).toMatch(/^Error: HTTPResponseBackend\/hello: delete failed \(HTTP 409/m);
    expect(json.json().failures).toEqual([{ address: 'HTTPResponseBackend/hello', method: 'delete', message: expect.any(String), status: expect.any(Number), error_code: expect.stringMatching(/^ERR_SERVICE_\d+$/), operation_id: expect.stringMatching(/\S+/) }]);
    expect(json.json().failures[0].message).toMatch(/^HTTP response backend bkdhr_\w+ is still referenced by edghtsrt_\w+/);
    expect((await all()).responseBackends).toEqual(['mine']);
    expect((await s.del(`/edges/https/${unmanaged.edge}/routes/${route.body.id}`)).status).toBe(204);
    const r = await me.run(['destroy', '-f', dir, '--auto-approve']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('Destroy complete! Resources: 1 destroyed.');
    expect(await all()).toEqual({
      policies: ['theirs: old', 'unmanaged'],
      rules: ['10.9.0.0/16'],
      tunnelBackends: ['theirs', 'unmanaged'],
      responseBackends: [],
      cas: 0,
      bots: ['unmanaged-bot'],
      edges: { 'theirs.example.com:443': [], 'unmanaged.example.com:443': [] },
    });
    const again = await me.run(['destroy', '-f', dir, '--auto-approve']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('No changes. Stack "mine" manages no resources.');
    expect((await other.run(['plan', '-f', theirDir, '--detailed-exitcode'])).code).toBe(0);
  });
});
