// `edgeform apply --cdktf DIR` deploys a synthesized CDKTF stack without Terraform, and
// must leave the same live state as `terraform apply` of that stack.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { synth } from '../../examples/cdktf/main.js';
import { manifestKinds } from '../../reconciler/manifest/kinds.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { hasTerraform, mirrorConfig, workspace } from '../helpers/terraform.js';
import { runCli } from '../helpers/cli.js';

process.env.CHECKPOINT_DISABLE = '1';

/** Live state without what differs between two servers or two tools: ids, uris, times, metadata stamps. */
async function liveState(s: TestServer) {
  const out: Record<string, string[]> = {};
  const scrub = (v: any): any => {
    if (Array.isArray(v)) return v.map(scrub);
    if (v && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).filter(([k]) => !['id', 'uri', 'created_at', 'metadata', 'entity_id', 'metadata_url', 'assertion_consumer_service_url', 'single_logout_url', 'single_logout_service_url', 'request_signing_certificate_pem'].includes(k)).map(([k, x]) => [k, scrub(x)]));
    }
    return typeof v === 'string' ? v.replace(/\b([a-z]+)_[A-Za-z0-9]{27}\b/g, '$1_*') : v;
  };
  for (const k of manifestKinds) {
    if (!k.envelope) continue;
    const items = (await s.get(`${k.path}?limit=100`)).body[k.envelope] as any[];
    const rules = k.kind === 'IPPolicy' ? ((await s.get('/ip_policy_rules?limit=100')).body.ip_policy_rules as any[]) : [];
    // Terraform creates routes in parallel, so their order is not part of the comparison.
    for (const i of items) if (Array.isArray(i.routes)) i.routes.sort((x: any, y: any) => x.match.localeCompare(y.match));
    out[k.kind] = items.map((i) => JSON.stringify(scrub({ ...i, rules: rules.filter((r) => r.ip_policy.id === i.id).map((r) => ({ cidr: r.cidr, action: r.action })).sort((a, b) => a.cidr.localeCompare(b.cidr)) }))).sort();
  }
  return out;
}

describe('edgeform --cdktf', () => {
  let a: TestServer;
  let b: TestServer;
  let stack: string;
  beforeAll(async () => {
    [a, b] = await Promise.all([startTestServer(), startTestServer()]);
    stack = synth(fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-synth-')), 'shop.example.com');
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it('validates the synthesized example, and refuses a folder without cdk.tf.json', async () => {
    const ok = await runCli(['validate', '--cdktf', stack]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/documents? valid/);
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-empty-'));
    const bad = await runCli(['validate', '--cdktf', empty]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('no cdk.tf.json');
  });

  it('applies the stack, then plans no changes', async () => {
    const env = { EDGEFORM_API_URL: a.url, EDGEFORM_API_KEY: a.token };
    const apply = await runCli(['apply', '--cdktf', stack, '--auto-approve'], env);
    expect(apply.code, apply.stdout + apply.stderr).toBe(0);
    expect(apply.stdout).toMatch(/Apply complete! Resources: \d+ added, 0 changed, 0 destroyed\./);
    const plan = await runCli(['plan', '--cdktf', stack, '--detailed-exitcode'], env);
    expect(plan.code, plan.stdout).toBe(0);
    expect(plan.stdout).toContain('No changes.');
  });

  it.skipIf(!hasTerraform)('leaves the same live state as terraform apply of the same stack', async () => {
    const tfDir = synth(fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-synth-')), 'shop.example.com');
    const tf = await workspace(b, { dir: tfDir, cliConfig: await mirrorConfig() });
    await tf.ok(['init', '-input=false']);
    await tf.apply();
    const [viaReconciler, viaTerraform] = await Promise.all([liveState(a), liveState(b)]);
    expect(viaReconciler).toEqual(viaTerraform);
    expect(viaReconciler.HTTPSEdge).toHaveLength(1);
  });
});
