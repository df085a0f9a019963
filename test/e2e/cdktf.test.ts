// The CDKTF layer: bindings generated from the catalog's provider schema (committed, and
// regenerated here to prove they are current), the higher-level constructs, and the example
// stack synthesized with cdktf's App and deployed with terraform init + apply.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateBindings, GEN_DIR, HEADER } from '../../provider/cdktf/generate.js';
import { resourceTypes } from '../../provider/terraform/schema.js';
import { synth } from '../../examples/cdktf/main.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { hasTerraform, mirrorConfig, workspace } from '../helpers/terraform.js';

process.env.CHECKPOINT_DISABLE = '1';

function committed(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) walk(full);
      else out.set(path.relative(dir, full), fs.readFileSync(full, 'utf8'));
    }
  };
  walk(dir);
  return out;
}

describe('CDKTF bindings', () => {
  it('are what the generator makes from the catalog today (run `npx tsx provider/cdktf/generate.ts` after changing it)', async () => {
    const version = JSON.parse(fs.readFileSync('package.json', 'utf8')).version;
    const fresh = await generateBindings(version);
    const onDisk = committed(GEN_DIR);
    expect([...onDisk.keys()].sort()).toEqual([...fresh.keys()].sort());
    for (const [file, text] of fresh) expect(onDisk.get(file), file).toBe(text);
    for (const text of onDisk.values()) expect(text.startsWith(HEADER)).toBe(true);
  });

  it('have one construct class per resource type', () => {
    const files = committed(GEN_DIR);
    for (const rt of resourceTypes) {
      const file = [...files.entries()].find(([, text]) => text.includes(`public static readonly tfResourceType = "${rt.typeName}";`));
      expect(file, rt.typeName).toBeDefined();
    }
  });

  it('synthesize the example stack: routes point at their edge, rules at their policy', () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-synth-'));
    const doc = JSON.parse(fs.readFileSync(path.join(synth(out), 'cdk.tf.json'), 'utf8'));
    const [edge] = Object.keys(doc.resource.edgeform_https_edge);
    const routes = Object.values(doc.resource.edgeform_https_edge_route) as Record<string, any>[];
    expect(routes.map((r) => r.edge_id)).toEqual([`\${edgeform_https_edge.${edge}.id}`, `\${edgeform_https_edge.${edge}.id}`]);
    const [policy] = Object.keys(doc.resource.edgeform_ip_policy);
    const rules = Object.values(doc.resource.edgeform_ip_policy_rule) as Record<string, any>[];
    expect(rules.map((r) => [r.cidr, r.action, r.ip_policy_id]).sort()).toEqual([
      ['2001:db8::/48', 'allow', `\${edgeform_ip_policy.${policy}.id}`],
      ['203.0.113.0/24', 'allow', `\${edgeform_ip_policy.${policy}.id}`],
      ['203.0.113.66', 'deny', `\${edgeform_ip_policy.${policy}.id}`],
    ]);
    expect(doc.terraform.required_providers.edgeform.source).toBe('registry.terraform.io/edgeform/edgeform');
    expect(JSON.stringify(doc)).not.toMatch(/api_key/);
  });
});

describe.skipIf(!hasTerraform)('CDKTF example stack through terraform', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('deploys with terraform init and apply in the synth output, then plans clean and destroys', async () => {
    const stack = synth(fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-synth-')), 'shop.example.com');
    const tf = await workspace(s, { dir: stack, cliConfig: await mirrorConfig() });
    await tf.ok(['init', '-input=false']);
    await tf.apply();
    const edges = (await s.get('/edges/https')).body.https_edges;
    expect(edges).toHaveLength(1);
    expect(edges[0].hostports).toEqual(['shop.example.com:443']);
    expect(edges[0].routes.map((r: any) => r.match).sort()).toEqual(['/', '/admin']);
    expect((await s.get('/ip_policy_rules')).body.ip_policy_rules).toHaveLength(3);
    const plan = await tf.plan();
    expect(plan.code, plan.stdout).toBe(0);
    await tf.ok(['destroy', '-auto-approve']);
    expect((await s.get('/edges/https')).body.https_edges).toEqual([]);
  });
});
