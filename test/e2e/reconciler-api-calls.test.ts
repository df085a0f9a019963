// The API-call bound of issue 5: a no-op plan of 1,000 declared resources makes at most one
// call per 50 of them, because refresh reads lists (100 per page), never one GET per
// resource; plus one list call for each kind the manifests do not declare, read so that a
// stack's leftovers of any kind show (issue 13). Calls are deterministic, so this is a fair assertion; speed is measured in
// bench/plan.ts, never asserted here.
import { stringify } from 'yaml';
import { manifestKinds } from '../../reconciler/manifest/kinds.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir, runCli } from '../helpers/cli.js';

const POLICIES = 500;
/** Each policy declares one rule: 1,000 declared resources in all. */
const DECLARED = POLICIES * 2;

describe('reconciler: API calls of a plan over 1,000 declared resources', () => {
  let s: TestServer;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    s = await startTestServer();
    env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, EDGEFORM_STACK: 'calls' };
    const docs = Array.from({ length: POLICIES }, (_, i) => ({
      kind: 'IPPolicy',
      name: `site-${i}`,
      description: `site ${i}`,
      rules: [{ cidr: `10.${i >> 8}.${i & 255}.0/24`, action: 'allow' }],
    }));
    dir = manifestDir({ 'sites.yaml': docs.map((d) => stringify(d)).join('---\n') });
    const applied = await runCli(['apply', '-f', dir, '--auto-approve', '--json'], env);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.json().applied.add).toBe(DECLARED);
  });

  afterAll(async () => {
    await s?.close();
  });

  const plan = async () => {
    const r = await runCli(['plan', '-f', dir, '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    return r.json();
  };

  it.each([
    { case: 'right after apply', drifted: 0, reason: 'the lists hold every policy and rule: 5 pages of policies, 5 of rules' },
    { case: 'after 10 rules changed out of band', drifted: 10, reason: 'drift is found in the same lists; finding it costs no extra reads' },
  ])('$case: at most 1 call per 50 declared resources, and 1 per undeclared kind ($reason)', async ({ drifted }) => {
    if (drifted) {
      const rules = (await s.get('/ip_policy_rules?limit=100')).body.ip_policy_rules.slice(0, drifted);
      for (const r of rules) expect((await s.patch(`/ip_policy_rules/${r.id}`, { description: 'changed by hand' })).status).toBe(200);
    }
    const p = await plan();
    const changed = p.resource_changes.filter((c: any) => c.change.actions[0] !== 'no-op');
    expect(changed).toHaveLength(drifted);
    expect(p.resource_changes).toHaveLength(DECLARED);
    expect(p.api_calls).toBeGreaterThan(0);
    expect(p.api_calls).toBeLessThanOrEqual(DECLARED / 50 + manifestKinds.length - 1);
  });
});
