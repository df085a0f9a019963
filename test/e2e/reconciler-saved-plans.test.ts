// Saved plans and confirmation: `plan --out FILE` writes an owner-only file that `apply FILE`
// carries out exactly, refused (naming the resources) when anything it touches changed
// since; and apply asks before changing anything, refusing without a terminal.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { NO_CHANGES, type StackRunner, stackRunner, toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;
const HOOK_SECRET = 'saved-plan-hook-secret-93ab';

const base: Doc[] = [
  { kind: 'IPPolicy', name: 'office', description: 'office', rules: [{ cidr: '10.1.0.0/16', action: 'allow' }] },
  { kind: 'IPPolicy', name: 'vpn', description: 'vpn' },
  { kind: 'HTTPResponseBackend', name: 'hello', body: 'hello' },
  { kind: 'EventDestination', name: 'hook', target: { http: { url: 'https://hooks.example.com/x', secret: '${env:HOOK_SECRET}' } } },
];

describe('reconciler: saved plans', () => {
  let s: TestServer;
  let r: StackRunner;
  let dir: string;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-plans-'));
  const write = (docs: Doc[]) => fs.writeFileSync(path.join(dir, 'stack.yaml'), toYaml(docs));
  const descriptions = async () => (await s.get('/ip_policies')).body.ip_policies.map((p: Doc) => p.description).sort();

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s, { HOOK_SECRET });
    dir = manifestDir({ 'stack.yaml': toYaml(base) });
  });
  afterAll(async () => {
    await s?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('writes the plan owner-only and applies exactly what it holds, not the manifests as they are now', async () => {
    const file = path.join(tmp, 'create.plan');
    // A file already there, readable by all, is made owner-only too.
    fs.writeFileSync(file, '', { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    const plan = await r.run(['plan', '-f', dir, '--out', file]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain('Plan: 5 to add, 0 to change, 0 to destroy.');
    expect(plan.stdout).toContain(`Saved the plan to ${file}. To carry it out exactly: edgeform apply ${file}`);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // The manifests move on after the plan was saved: the saved plan does not.
    write([...base, { kind: 'IPPolicy', name: 'later', description: 'later' }]);
    const applied = await r.run(['apply', file]);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(applied.stdout).toContain('Apply complete! Resources: 5 added, 0 changed, 0 destroyed.');
    expect(await descriptions()).toEqual(['office', 'vpn']);
    write(base);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('refuses a saved plan applied twice: what it creates exists now', async () => {
    const applied = await r.run(['apply', path.join(tmp, 'create.plan')]);
    expect(applied.code).toBe(1);
    expect(applied.stderr).toMatch(/the saved plan is stale: .*IPPolicy\/office \(now exists\)/);
    expect(await descriptions()).toEqual(['office', 'vpn']);
  });

  it('refuses a plan made stale by a change outside edgeform, naming the resource, and changes nothing', async () => {
    write(base.map((d) => (d.name === 'office' ? { ...d, description: 'head office' } : d.name === 'vpn' ? { ...d, description: 'remote access' } : d)));
    const file = path.join(tmp, 'update.plan');
    expect((await r.run(['plan', '-f', dir, '--out', file])).code).toBe(0);
    const vpn = (await s.get('/ip_policies')).body.ip_policies.find((p: Doc) => p.description === 'vpn');
    expect((await s.patch(`/ip_policies/${vpn.id}`, { description: 'changed by hand' })).status).toBe(200);
    const applied = await r.run(['apply', file]);
    expect(applied.code).toBe(1);
    expect(applied.stderr).toContain('the saved plan is stale: IPPolicy/vpn (changed) changed since it was made; run plan again');
    expect(applied.stderr).not.toContain('IPPolicy/office');
    expect(await descriptions()).toEqual(['changed by hand', 'office']);
  });

  it('refuses a plan whose resource was deleted since, and one made for another stack or server', async () => {
    const file = path.join(tmp, 'update.plan');
    const vpn = (await s.get('/ip_policies')).body.ip_policies.find((p: Doc) => p.description === 'changed by hand');
    expect((await s.del(`/ip_policies/${vpn.id}`)).status).toBe(204);
    const deleted = await r.run(['apply', file]);
    expect(deleted.code).toBe(1);
    expect(deleted.stderr).toContain('IPPolicy/vpn (deleted)');
    const otherStack = await r.run(['apply', file, '--stack', 'other']);
    expect(otherStack.code).toBe(1);
    expect(otherStack.stderr).toContain('the plan was made for stack "default", not "other"; pass --stack default');
    const otherServer = await r.run(['apply', file, '--api-url', 'http://127.0.0.1:9']);
    expect(otherServer.code).toBe(1);
    expect(otherServer.stderr).toContain(`the plan was made against ${s.url}, not http://127.0.0.1:9`);
    const both = await r.run(['apply', file, '-f', dir]);
    expect(both.code, 'a plan file and manifests together is a usage error').toBe(2);
    expect(both.stderr).toContain('give either a saved plan file or manifests');
    const missing = await r.run(['apply', path.join(tmp, 'nope.plan')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('cannot read the saved plan');
  });

  it('applies a fresh plan although unrelated resources changed since', async () => {
    const file = path.join(tmp, 'fresh.plan');
    expect((await r.run(['plan', '-f', dir, '--out', file])).code).toBe(0);
    // The backend is not part of this plan's changes: editing it does not make the plan stale.
    const backend = (await s.get('/backends/http_response')).body.backends[0];
    expect((await s.patch(`/backends/http_response/${backend.id}`, { description: 'touched by hand' })).status).toBe(200);
    const applied = await r.run(['apply', file]);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(applied.stdout).toContain('Apply complete! Resources: 1 added, 1 changed, 0 destroyed.');
    expect(await descriptions()).toEqual(['head office', 'remote access']);
  });

  it('never printed the webhook secret, and the saved plan file holds none: only a fingerprint', () => {
    expect(r.outputs.join('\n')).not.toContain(HOOK_SECRET);
    const saved = JSON.parse(fs.readFileSync(path.join(tmp, 'create.plan'), 'utf8'));
    expect(JSON.stringify(saved)).not.toContain(HOOK_SECRET);
    expect(saved.secrets).toEqual([expect.objectContaining({ address: 'EventDestination/hook', path: 'target.http.secret', fingerprint: expect.stringMatching(/^k1\./) })]);
  });

  it('interpolates the write-only values again at apply, and refuses one that differs, naming it', async () => {
    const other = manifestDir({ 'stack.yaml': toYaml([{ kind: 'EventDestination', name: 'hook2', target: { http: { url: 'https://hooks.example.com/y', secret: '${env:HOOK_SECRET}' } } }]) });
    const file = path.join(tmp, 'secret.plan');
    const me = stackRunner(s, { HOOK_SECRET, EDGEFORM_STACK: 'hooks' });
    expect((await me.run(['plan', '-f', other, '--out', file])).code).toBe(0);
    const changed = await me.run(['apply', file], { HOOK_SECRET: 'another-secret-value' });
    expect(changed.code).toBe(1);
    expect(changed.stderr).toContain('the value of EventDestination/hook2 target.http.secret differs from the one the plan was made with');
    expect((await s.get('/event_destinations')).body.event_destinations.filter((d: Doc) => d.target?.http?.url === 'https://hooks.example.com/y')).toEqual([]);
    const same = await me.run(['apply', file]);
    expect(same.code, same.stdout + same.stderr).toBe(0);
    expect((await s.get('/event_destinations')).body.event_destinations.filter((d: Doc) => d.target?.http?.url === 'https://hooks.example.com/y')).toHaveLength(1);
    // The plan made now says no change: the secret sent was the declared one (its fingerprint is in the stamp).
    expect((await me.run(['plan', '-f', other])).stdout).toContain(NO_CHANGES);
  });
});

describe('reconciler: confirmation before apply and destroy', () => {
  let s: TestServer;
  let r: StackRunner;
  let dir: string;
  const policies = async () => (await s.get('/ip_policies')).body.ip_policies.length;

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s, { EDGEFORM_STACK: 'confirm' });
    dir = manifestDir({ 'stack.yaml': toYaml([{ kind: 'IPPolicy', name: 'office' }]) });
  });
  afterAll(async () => {
    await s?.close();
  });

  it.each(['apply', 'destroy'])('%s without --auto-approve and without a terminal refuses, naming --auto-approve', async (cmd) => {
    if (cmd === 'destroy') await r.apply(['-f', dir]);
    const before = await policies();
    const res = await r.run([cmd, '-f', dir]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/needs confirmation, and there is no terminal to ask on; pass --auto-approve/);
    expect(await policies()).toBe(before);
  });

  it.each([
    { answer: 'no', reason: 'a refusal' },
    { answer: 'y', reason: 'only the whole word counts' },
    { answer: 'YES', reason: 'Terraform accepts only lower-case yes' },
    { answer: '', reason: 'an empty answer' },
  ])('cancels destroy on a terminal answering "$answer" ($reason)', async ({ answer }) => {
    const res = await r.run(['destroy', '-f', dir], {}, answer);
    expect(res.code).toBe(1);
    expect(res.stdout).toContain("Only 'yes' will be accepted to approve.");
    expect(res.stdout).toContain('Destroy cancelled.');
    expect(await policies()).toBe(1);
  });

  it('destroys on a terminal answering "yes", then applies on one answering "yes"', async () => {
    const destroyed = await r.run(['destroy', '-f', dir], {}, 'yes');
    expect(destroyed.code, destroyed.stderr).toBe(0);
    expect(destroyed.stdout).toContain('Destroy complete! Resources: 1 destroyed.');
    expect(await policies()).toBe(0);
    const cancelled = await r.run(['apply', '-f', dir], {}, 'nope');
    expect(cancelled.code).toBe(1);
    expect(cancelled.stdout).toContain('Apply cancelled.');
    expect(await policies()).toBe(0);
    const applied = await r.run(['apply', '-f', dir], {}, ' yes ');
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('Do you want to perform these actions?');
    expect(applied.stdout).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
    expect(await policies()).toBe(1);
  });

  it('does not ask when there is nothing to do', async () => {
    const res = await r.run(['apply', '-f', dir]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(NO_CHANGES);
  });
});
