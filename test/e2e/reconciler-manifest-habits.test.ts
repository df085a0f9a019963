// Habits of a repository of manifests: empty YAML documents are skipped (as kubectl does),
// hidden files and --exclude globs keep CI files out of `-f DIR`, and a rule or route
// removed from its parent's document is deleted by a plain apply, saying why.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { NO_CHANGES, stackRunner, toYaml, type StackRunner } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;

let s: TestServer;
let r: StackRunner;
beforeAll(async () => {
  s = await startTestServer();
  // A named stack: destroy refuses the implicit one.
  r = stackRunner(s, { EDGEFORM_STACK: 'habits' });
});
afterAll(async () => {
  await s?.close();
});

describe('manifest files', () => {
  it('empty documents (a trailing ---, only comments, ~) declare nothing and are no error', async () => {
    const dir = manifestDir({
      'helm.yaml': '---\n# Source: chart/templates/policy.yaml\nkind: IPPolicy\nname: helm\n---\n# Source: chart/templates/empty.yaml\n---\n~\n---\n',
      'only-comments.yaml': '# nothing here yet\n',
    });
    const v = await r.run(['validate', '-f', dir]);
    expect(v.code, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toContain('1 document valid');
    const plan = await r.planJson(['-f', dir]);
    expect(plan.resource_changes.map((c: Doc) => c.address)).toEqual(['IPPolicy/helm']);
  });

  it('a folder skips hidden files and folders, and --exclude skips what else is not a manifest, on every command that takes -f', async () => {
    const dir = manifestDir({
      '.github/workflows/ci.yml': 'on: push\njobs:\n  test: {runs-on: ubuntu-latest}\n',
      '.gitlab-ci.yml': 'stages: [test]\n',
      'docker-compose.yml': 'services:\n  api: {image: edgeform}\n',
      'ci/deploy.yaml': 'steps: []\n',
      'infra/policy.yaml': toYaml([{ kind: 'IPPolicy', name: 'repo', rules: [{ cidr: '198.51.100.0/24', action: 'allow' }] }]),
    });
    const plain = await r.run(['validate', '-f', dir]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('docker-compose.yml:1: missing kind');
    expect(plain.stderr).toContain('deploy.yaml:1: missing kind');
    expect(plain.stderr).not.toContain('.gitlab-ci.yml');
    expect(plain.stderr).not.toContain('.github');
    const exclude = ['--exclude', 'docker-compose*.yml', '--exclude', 'ci/**'];
    const v = await r.run(['validate', '-f', dir, ...exclude]);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout).toContain('1 document valid');
    expect((await r.planJson(['-f', dir, ...exclude])).resource_changes.map((c: Doc) => c.address)).toEqual(['IPPolicy/repo', 'IPPolicy/repo.rules["198.51.100.0/24"]']);
    await r.apply(['-f', dir, ...exclude]);
    expect((await r.run(['plan', '-f', dir, '--exclude', 'docker-compose.yml', '--exclude', 'ci'])).stdout).toContain(NO_CHANGES);
    const destroy = await r.run(['destroy', '-f', dir, ...exclude, '--auto-approve']);
    expect(destroy.code, destroy.stdout + destroy.stderr).toBe(0);
    // Excluding everything is an error that says what was skipped, not "nothing declared".
    const none = await r.run(['plan', '-f', dir, ...exclude, '--exclude', 'infra']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no \*\.yaml or \*\.yml files in this folder \(or below\) \(5 hidden or --exclude'd files or folders skipped\)/);
  });
});

describe('children removed from their parent', () => {
  const docs = (rules: string[], routes: string[]) => [
    { kind: 'IPPolicy', name: 'office', rules: rules.map((cidr) => ({ cidr, action: 'allow' })) },
    { kind: 'HTTPResponseBackend', name: 'ok', body: 'ok', status_code: 200 },
    { kind: 'HTTPSEdge', name: 'web', hostports: ['habits.example.com:443'], routes: routes.map((match) => ({ match_type: 'path_prefix', match, backend: { backend_id: 'HTTPResponseBackend/ok' } })) },
  ];

  it('are deleted by a plain apply, as Terraform deletes a removed nested block, and the plan says why', async () => {
    await r.apply(['-f', manifestDir({ 'm.yaml': toYaml(docs(['192.0.2.0/24', '192.0.2.128/32'], ['/', '/old'])) })]);
    const dir = manifestDir({ 'm.yaml': toYaml(docs(['192.0.2.0/24'], ['/'])) });
    const plan = await r.run(['plan', '-f', dir]);
    expect(plan.stdout).toContain('# IPPolicy/office.rules["192.0.2.128/32"] will be destroyed (no longer listed in IPPolicy/office, whose document it is part of; deleted without --prune)');
    expect(plan.stdout).toContain('# HTTPSEdge/web.routes["/old"] will be destroyed (no longer listed in HTTPSEdge/web, whose document it is part of; deleted without --prune)');
    expect(plan.stdout).toContain('Plan: 0 to add, 0 to change, 2 to destroy.');
    const json = await r.planJson(['-f', dir]);
    const route = json.resource_changes.find((c: Doc) => c.address === 'HTTPSEdge/web.routes["/old"]');
    expect(route).toMatchObject({ action_reason: 'delete_because_removed_from_parent', parent_address: 'HTTPSEdge/web', change: { actions: ['delete'] } });
    await r.apply(['-f', dir]);
    const edge = (await s.get('/edges/https')).body.https_edges.find((e: Doc) => e.hostports.includes('habits.example.com:443'));
    expect(edge.routes.map((x: Doc) => x.match)).toEqual(['/']);
    const rules = (await s.get('/ip_policy_rules')).body.ip_policy_rules.map((x: Doc) => x.cidr);
    expect(rules).toEqual(['192.0.2.0/24']);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });
});
