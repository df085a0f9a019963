// The provider installs like one: the self-contained executable (Node's single-executable
// application) from a filesystem mirror, on a runner where `terraform` is the only program
// on the PATH; init, plan, apply and import work there.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildExecutable } from '../../provider/terraform/sea.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { hasTerraform, mirrorConfig, workspace } from '../helpers/terraform.js';

describe.skipIf(!hasTerraform)('the provider without Node.js', () => {
  let server: TestServer;
  let exe: string;
  let bin: string;
  beforeAll(async () => {
    server = await startTestServer();
    exe = await buildExecutable(process.cwd(), path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-sea-out-')), 'terraform-provider-edgeform'));
    // A PATH that holds only terraform: no node, no npx, no shell tools.
    bin = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-only-terraform-'));
    fs.symlinkSync(execFileSync('sh', ['-c', 'command -v terraform'], { encoding: 'utf8' }).trim(), path.join(bin, 'terraform'));
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    if (exe) fs.rmSync(path.dirname(exe), { recursive: true, force: true });
  });

  it('is a native executable, not a script for node', () => {
    const head = Buffer.alloc(4);
    const fd = fs.openSync(exe, 'r');
    fs.readSync(fd, head, 0, 4, 0);
    fs.closeSync(fd);
    expect(head.subarray(0, 2).toString()).not.toBe('#!');
    if (process.platform === 'linux') expect(head).toEqual(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
    // Run with an empty environment it still starts (and says it is a plugin): no node needed.
    const r = spawnSync(exe, [], { env: {}, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('This binary is a Terraform plugin');
  });

  it('passes terraform init, plan, apply and import with only terraform on the PATH', async () => {
    const tf = await workspace(server, { cliConfig: await mirrorConfig(exe) });
    tf.env.PATH = bin;
    expect(spawnSync('node', ['--version'], { env: tf.env }).error).toBeDefined();
    expect(fs.readdirSync(bin)).toEqual(['terraform']);
    tf.write(`resource "edgeform_ip_policy" "office" {
  description = "office"
}
resource "edgeform_ip_policy_rule" "lan" {
  ip_policy_id = edgeform_ip_policy.office.id
  cidr         = "10.0.0.0/8"
  action       = "allow"
}
`);
    const init = await tf.ok(['init', '-input=false']);
    expect(init.stdout).toMatch(/Installing edgeform\/edgeform v[\d.]+/);
    expect((await tf.plan()).code).toBe(2);
    await tf.apply();
    const policies = (await server.get('/ip_policies')).body.ip_policies as { id: string; description: string }[];
    expect(policies.map((p) => p.description)).toEqual(['office']);
    expect((await tf.plan()).code).toBe(0);
    // import: a policy made by hand is brought under terraform.
    const byHand = (await server.post('/ip_policies', { description: 'by hand' })).body as { id: string };
    tf.write(`resource "edgeform_ip_policy" "hand" {
  description = "by hand"
}
`);
    await tf.ok(['state', 'rm', 'edgeform_ip_policy_rule.lan', 'edgeform_ip_policy.office']);
    await tf.ok(['import', 'edgeform_ip_policy.hand', byHand.id]);
    expect((await tf.plan()).code).toBe(0);
    expect((await tf.state())['edgeform_ip_policy.hand'].id).toBe(byHand.id);
  }, 180_000);
});
