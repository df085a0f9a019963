// The reconciler's life cycle on the example: created from nothing with Terraform's
// lines and exit codes, changes made outside edgeform found and put back, and changes to
// identity (a route's match, a rule's action) planned as replacements. Steps run in order
// on one server; each leaves the stack applied for the next.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { activeChanges, NO_CHANGES, QUICKSTART, stackRunner, type StackRunner } from '../helpers/reconciler.js';

const GH_SECRET = 'gh-lifecycle-secret-7c1e';

describe('reconciler life cycle (the issue example)', () => {
  let s: TestServer;
  let r: StackRunner;
  let dir: string;
  const example = fs.readFileSync(path.join(QUICKSTART, 'web.yaml'), 'utf8');

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s, { GH_SECRET });
    dir = manifestDir({ 'web.yaml': example });
  });
  afterAll(async () => {
    await s?.close();
  });

  const edge = async () => (await s.get('/edges/https')).body.https_edges.find((e: any) => e.hostports.includes('app.example.com:443'));
  const policy = async () => (await s.get('/ip_policies')).body.ip_policies.find((p: any) => p.description === 'office networks');
  const rules = async () => (await s.get('/ip_policy_rules')).body.ip_policy_rules;

  it('plans 5 creates from nothing, with --detailed-exitcode 2', async () => {
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.code, plan.stderr).toBe(2);
    expect(plan.stdout).toContain('Plan: 5 to add, 0 to change, 0 to destroy.');
    for (const address of ['IPPolicy/office', 'IPPolicy/office.rules["203.0.113.0/24"]', 'HTTPResponseBackend/hello', 'HTTPSEdge/web', 'HTTPSEdge/web.routes["/"]']) {
      expect(plan.stdout).toContain(`  + ${address}\n`);
      expect(plan.stdout).toContain(`  # ${address} will be created`);
    }
    expect(plan.stdout).toMatch(/^API calls: \d+$/m);
    // A plan changes nothing.
    expect((await s.get('/edges/https')).body.https_edges).toEqual([]);
  });

  it('applies with Terraform\'s summary line, then plans no changes with --detailed-exitcode 0', async () => {
    const applied = await r.apply(['-f', dir]);
    expect(applied.stdout).toContain('Apply complete! Resources: 5 added, 0 changed, 0 destroyed.');
    expect(applied.stdout).toMatch(/HTTPSEdge\/web\.routes\["\/"\]: Creation complete after \d+s \[id=edghtsrt_\w+\]/);
    const e = await edge();
    expect(e.routes).toHaveLength(1);
    expect(e.routes[0]).toMatchObject({ match: '/', backend: { enabled: true }, ip_restriction: { ip_policies: [{ id: (await policy()).id }] }, oauth: { provider: { github: { client_id: 'abc' } } } });
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code, plan.stdout).toBe(0);
    const again = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 0 destroyed.');
  });

  it.each<{ case: string; args: string[]; files: Record<string, string>; message: RegExp }>([
    { case: 'an unreachable API', args: ['--api-url', 'http://127.0.0.1:9'], files: {}, message: /cannot reach the API at http:\/\/127\.0\.0\.1:9/ },
    { case: 'a rejected key', args: ['--api-key', 'not-a-valid-key'], files: {}, message: /the API refused the key \(401/ },
    { case: 'an invalid manifest', args: [], files: { 'bad.yaml': 'kind: IPPolicy\nname: x\ncolour: red\n' }, message: /bad\.yaml:3: / },
  ])('exits 1 on an error, even with --detailed-exitcode: $case', async ({ args, files, message }) => {
    const target = Object.keys(files).length ? manifestDir(files) : dir;
    const plan = await r.run(['plan', '-f', target, '--detailed-exitcode', ...args]);
    expect(plan.code).toBe(1);
    expect(plan.stderr).toMatch(message);
  });

  it('--json describes every resource: address, kind, name, actions, before and after, and the API calls made', async () => {
    const p = await r.planJson(['-f', dir]);
    expect(p.changes).toBe(false);
    expect(p.summary).toEqual({ add: 0, change: 0, destroy: 0 });
    expect(p.resource_changes.map((c: any) => [c.address, c.kind, c.name, c.change.actions])).toEqual([
      ['IPPolicy/office', 'IPPolicy', 'office', ['no-op']],
      ['IPPolicy/office.rules["203.0.113.0/24"]', 'IPPolicyRule', '203.0.113.0/24', ['no-op']],
      ['HTTPResponseBackend/hello', 'HTTPResponseBackend', 'hello', ['no-op']],
      ['HTTPSEdge/web', 'HTTPSEdge', 'web', ['no-op']],
      ['HTTPSEdge/web.routes["/"]', 'HTTPSEdgeRoute', '/', ['no-op']],
    ]);
    const route = p.resource_changes[4];
    expect(route.id).toBe((await edge()).routes[0].id);
    expect(route.change.before).toEqual(route.change.after);
    expect(route.change.after).toMatchObject({ match: '/', match_type: 'path_prefix', backend: { backend_id: expect.stringMatching(/^bkdhr_/) } });
    expect(route.change.after.oauth.provider.github.client_secret).toBe('(sensitive value)');
    // One request for the kinds holding the stack's resources (so that leftovers of a kind no
    // longer declared show; docs/api.md, "Stack kinds"); then lists, one page each, of the 3
    // declared kinds and the rules (routes come inside their edge); and one request for the
    // keyed fingerprint of the route's OAuth secret (docs/api.md, "Secret fingerprints").
    expect(p.api_calls).toBe(1 + 3 + 1 + 1);
  });

  it('finds a field changed outside edgeform (a PATCH), shows it as drift, and puts it back', async () => {
    const id = (await policy()).id;
    expect((await s.patch(`/ip_policies/${id}`, { description: 'changed by hand' })).status).toBe(200);
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain('Note: Objects have changed outside edgeform');
    expect(plan.stdout).toContain('# IPPolicy/office will be updated in-place (changed outside edgeform since the last apply)');
    expect(plan.stdout).toContain('~ description = "changed by hand" -> "office networks"');
    expect(plan.stdout).toContain('Plan: 0 to add, 1 to change, 0 to destroy.');
    const json = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.keys(json)).toEqual(['IPPolicy/office']);
    expect(json['IPPolicy/office']).toMatchObject({ drift: true, change: { actions: ['update'], before: { description: 'changed by hand' }, after: { description: 'office networks' } } });
    const refreshOnly = await r.run(['plan', '-f', dir, '--refresh-only']);
    expect(refreshOnly.stdout).toContain('Objects have changed outside edgeform');
    expect(refreshOnly.stdout).toContain('IPPolicy/office');
    const applied = await r.apply(['-f', dir]);
    expect(applied.stdout).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
    expect((await policy()).description).toBe('office networks');
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('finds a route module deleted outside edgeform and puts it back', async () => {
    const e = await edge();
    const route = e.routes[0];
    expect((await s.del(`/edges/https/${e.id}/routes/${route.id}/ip_restriction`)).status).toBe(204);
    expect((await s.get(`/edges/https/${e.id}/routes/${route.id}`)).body.ip_restriction).toBeNull();
    const plan = await r.run(['plan', '-f', dir]);
    expect(plan.stdout).toContain('# HTTPSEdge/web.routes["/"] will be updated in-place');
    // The module comes back whole, shown as a block the way Terraform shows a nested object.
    expect(plan.stdout).toMatch(/ {6}\+ ip_restriction = \{\n {10}\+ enabled {7}= true\n {10}\+ ip_policy_ids = \["ipp_\w+"\]\n {8}\}\n/);
    expect(plan.stdout).toContain('Plan: 0 to add, 1 to change, 0 to destroy.');
    const applied = await r.apply(['-f', dir]);
    expect(applied.stdout).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
    const after = (await edge()).routes[0];
    expect(after.id).toBe(route.id);
    expect(after.ip_restriction).toMatchObject({ enabled: true, ip_policies: [{ id: (await policy()).id }] });
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('finds resources deleted outside edgeform (a rule, an edge with its route) and creates them again', async () => {
    const [rule] = await rules();
    expect((await s.del(`/ip_policy_rules/${rule.id}`)).status).toBe(204);
    const e = await edge();
    expect((await s.del(`/edges/https/${e.id}`)).status).toBe(204);
    const p = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.fromEntries(Object.entries(p).map(([a, c]) => [a, c.change.actions]))).toEqual({
      'IPPolicy/office.rules["203.0.113.0/24"]': ['create'],
      'HTTPSEdge/web': ['create'],
      'HTTPSEdge/web.routes["/"]': ['create'],
    });
    const applied = await r.apply(['-f', dir]);
    expect(applied.stdout).toContain('Apply complete! Resources: 3 added, 0 changed, 0 destroyed.');
    expect(await rules()).toHaveLength(1);
    expect((await s.get('/edges/https')).body.https_edges).toHaveLength(1);
    expect((await edge()).routes).toHaveLength(1);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('replaces a route whose match is renamed (delete, then create)', async () => {
    const oldRoute = (await edge()).routes[0];
    fs.writeFileSync(path.join(dir, 'web.yaml'), example.replace('match: /\n', 'match: /app\n'));
    const p = await r.planJson(['-f', dir]);
    const active = activeChanges(p);
    expect(Object.keys(active)).toEqual(['HTTPSEdge/web.routes["/app"]']);
    expect(active['HTTPSEdge/web.routes["/app"]']).toMatchObject({ id: oldRoute.id, change: { actions: ['delete', 'create'], before: { match: '/' }, after: { match: '/app' } } });
    const text = await r.run(['plan', '-f', dir]);
    expect(text.stdout).toContain('# HTTPSEdge/web.routes["/app"] must be replaced');
    // As an update shows it: the key that forces it, not every module the route never had.
    expect(text.stdout).toContain('~ match = "/" -> "/app" # forces replacement');
    expect(text.stdout).not.toContain('= null');
    expect(text.stdout).toContain('Plan: 1 to add, 0 to change, 1 to destroy.');
    await r.apply(['-f', dir]);
    const routes = (await edge()).routes;
    expect(routes.map((x: any) => x.match)).toEqual(['/app']);
    expect(routes[0].id).not.toBe(oldRoute.id);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('replaces an IP policy rule whose action changes, which the API cannot update', async () => {
    const [oldRule] = await rules();
    fs.writeFileSync(path.join(dir, 'web.yaml'), example.replace('match: /\n', 'match: /app\n').replace('action: allow', 'action: deny'));
    const active = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.keys(active)).toEqual(['IPPolicy/office.rules["203.0.113.0/24"]']);
    expect(active['IPPolicy/office.rules["203.0.113.0/24"]'].change).toMatchObject({ actions: ['delete', 'create'], before: { action: 'allow' }, after: { action: 'deny' }, replace_paths: ['/action'] });
    const text = await r.run(['plan', '-f', dir]);
    expect(text.stdout).toContain('~ action = "allow" -> "deny" # forces replacement');
    await r.apply(['-f', dir]);
    const now = await rules();
    expect(now).toHaveLength(1);
    expect(now[0]).toMatchObject({ cidr: '203.0.113.0/24', action: 'deny' });
    expect(now[0].id).not.toBe(oldRule.id);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('never printed the OAuth client secret', () => {
    expect(r.outputs.join('\n')).not.toContain(GH_SECRET);
  });
});
