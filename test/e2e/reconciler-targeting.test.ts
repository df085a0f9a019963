// --target, --exclude and --replace, as Terraform users reach for them, through the real CLI
// against a real server: a target keeps what it needs and warns; an exclusion drops what
// needs it; a pattern that matches nothing is an error; --replace rotates an unchanged
// API key and writes the new token.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { activeChanges, NO_CHANGES, stackRunner, toYaml } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const docs = (n: number) => toYaml([
  { kind: 'IPPolicy', name: 'office', description: `office ${n}`, rules: [{ cidr: '10.0.0.0/8', action: 'allow' }] },
  { kind: 'IPPolicy', name: 'vpn', description: `vpn ${n}` },
  { kind: 'HTTPResponseBackend', name: 'hello', body: `hello ${n}` },
  { kind: 'HTTPSEdge', name: 'web', hostports: ['target.example.com:443'], routes: [
    { match_type: 'path_prefix', match: '/', backend: { backend_id: 'HTTPResponseBackend/hello' }, ip_restriction: { ip_policy_ids: ['IPPolicy/office'] } },
    { match_type: 'path_prefix', match: '/api', description: `api ${n}`, backend: { backend_id: 'HTTPResponseBackend/hello' } },
  ] },
]);

describe('reconciler: targeting and forced replacement', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(() => s.close());

  it('--target plans the target and what it needs, with a warning; the rest waits', async () => {
    const dir = manifestDir({ 'stack.yaml': docs(1) });
    const me = stackRunner(s, { EDGEFORM_STACK: 'targets' });
    const plan = await me.run(['plan', '-f', dir, '--target', 'HTTPSEdge/web', '--json']);
    expect(plan.code, plan.stderr).toBe(0);
    // The edge needs the backend and the office policy (its routes refer to them); not the vpn policy.
    expect(Object.keys(activeChanges(plan.json())).sort()).toEqual(['HTTPResponseBackend/hello', 'HTTPSEdge/web', 'HTTPSEdge/web.routes["/"]', 'HTTPSEdge/web.routes["/api"]', 'IPPolicy/office', 'IPPolicy/office.rules["10.0.0.0/8"]']);
    expect(plan.stderr).toMatch(/Warning: Resource targeting is in effect/);
    await me.run(['apply', '-f', dir, '--target', 'HTTPSEdge/web', '--auto-approve']);
    expect((await s.get('/ip_policies')).body.ip_policies.map((p: any) => p.description)).toEqual(['office 1']);
    // A child alone, and a kind pattern.
    const next = manifestDir({ 'stack.yaml': docs(2) });
    const child = await me.planJson(['-f', next, '--target', 'HTTPSEdge/web.routes["/api"]']);
    expect(Object.keys(activeChanges(child))).toEqual(['HTTPSEdge/web.routes["/api"]']);
    const kinds = await me.planJson(['-f', next, '--target', 'IPPolicy/*']);
    expect(Object.keys(activeChanges(kinds)).sort()).toEqual(['IPPolicy/office', 'IPPolicy/vpn']);
    await me.apply(['-f', dir]);
  });

  it('--exclude leaves out the resource and what needs it; file globs still work', async () => {
    const dir = manifestDir({ 'stack.yaml': docs(3), 'ci/skip.yaml': 'kind: IPPolicy\nname: ci\n' });
    const me = stackRunner(s, { EDGEFORM_STACK: 'targets' });
    const plan = await me.planJson(['-f', dir, '--exclude', 'ci/**', '--exclude', 'HTTPResponseBackend/hello']);
    const active = Object.keys(activeChanges(plan)).sort();
    expect(active).toEqual(['HTTPSEdge/web.routes["/api"]', 'IPPolicy/office', 'IPPolicy/vpn']);
    expect(active).not.toContain('IPPolicy/ci');
  });

  it('a target or exclusion that matches nothing is an error with a suggestion, never "No changes"', async () => {
    const dir = manifestDir({ 'stack.yaml': docs(3) });
    const me = stackRunner(s, { EDGEFORM_STACK: 'targets' });
    const r = await me.run(['plan', '-f', dir, '--target', 'HTTPSEdge/wbe']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--target HTTPSEdge/wbe matches no resource of this plan (did you mean HTTPSEdge/web?)');
    expect(r.stdout).not.toContain(NO_CHANGES);
    const x = await me.run(['apply', '-f', dir, '--exclude', 'IPPolicy/nope', '--auto-approve']);
    expect(x.code).toBe(1);
    expect(x.stderr).toContain('--exclude IPPolicy/nope matches no resource');
  });

  it('--replace rotates an unchanged API key and writes its new token; unknown or child addresses are refused', async () => {
    const dir = manifestDir({ 'keys.yaml': toYaml([{ kind: 'BotUser', name: 'ci' }, { kind: 'APIKey', name: 'ci-key', description: 'ci', owner_id: 'BotUser/ci', token_file: 'ci.token' }]) });
    const me = stackRunner(s, { EDGEFORM_STACK: 'rotate' });
    await me.apply(['-f', dir]);
    const tokenFile = path.join(dir, 'ci.token');
    const first = fs.readFileSync(tokenFile, 'utf8').trim();
    const before = (await s.get('/api_keys')).body.keys.map((k: any) => k.id);
    const plan = await me.planJson(['-f', dir, '--replace', 'APIKey/ci-key']);
    expect(activeChanges(plan)['APIKey/ci-key'].change.actions).toHaveLength(2);
    await me.apply(['-f', dir, '--replace', 'APIKey/ci-key']);
    const second = fs.readFileSync(tokenFile, 'utf8').trim();
    expect(second).not.toBe(first);
    const after = (await s.get('/api_keys')).body.keys.map((k: any) => k.id);
    expect(after.length).toBe(before.length);
    expect(after.filter((id: string) => !before.includes(id))).toHaveLength(1);
    // The old token no longer works; the new one does.
    expect((await s.get('/ip_policies', { token: first })).status).toBe(401);
    expect((await s.get('/ip_policies', { token: second })).status).toBe(200);
    const bad = await me.run(['plan', '-f', dir, '--replace', 'APIKey/ci-kye']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--replace APIKey/ci-kye names no declared document (did you mean APIKey/ci-key?)');
  });
});
