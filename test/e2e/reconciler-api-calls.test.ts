// The API-call bound of issue 5: a no-op plan of 1,000 declared resources makes at most one
// call per 50 of them, because refresh reads lists (100 per page), never one GET per
// resource. The kinds the manifests do not declare cost one call in all: the server says
// which of them still hold the stack's resources (GET /_edgeform/stack_kinds/{stack}), and
// only those are read, so a stack's leftovers of any kind still show (issue 13). Calls are
// deterministic, so this is a fair assertion; speed is measured in bench/plan.ts, never
// asserted here.
import { stringify } from 'yaml';
import { manifestKinds } from '../../reconciler/manifest/kinds.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir, runCli } from '../helpers/cli.js';
import { startProxy } from '../helpers/proxy.js';
import { activeChanges, stackRunner, toYaml } from '../helpers/reconciler.js';

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
  ])('$case: at most 1 call per 50 declared resources, undeclared kinds included ($reason)', async ({ drifted }) => {
    if (drifted) {
      const rules = (await s.get('/ip_policy_rules?limit=100')).body.ip_policy_rules.slice(0, drifted);
      for (const r of rules) expect((await s.patch(`/ip_policy_rules/${r.id}`, { description: 'changed by hand' })).status).toBe(200);
    }
    const p = await plan();
    const changed = p.resource_changes.filter((c: any) => c.change.actions[0] !== 'no-op');
    expect(changed).toHaveLength(drifted);
    expect(p.resource_changes).toHaveLength(DECLARED);
    expect(p.api_calls).toBeGreaterThan(0);
    expect(p.api_calls).toBeLessThanOrEqual(DECLARED / 50);
  });
});

describe('reconciler: API calls of a plan whose manifests dropped a kind', () => {
  let s: TestServer;
  let dir: string;

  beforeAll(async () => {
    s = await startTestServer();
    const both = manifestDir({
      'all.yaml': toYaml([
        { kind: 'IPPolicy', name: 'office', rules: [{ cidr: '203.0.113.0/24', action: 'allow' }] },
        { kind: 'HTTPResponseBackend', name: 'hello', body: 'hello', status_code: 200 },
      ]),
    });
    await stackRunner(s, { EDGEFORM_STACK: 'dropped' }).apply(['-f', both]);
    // Another stack's backend, and one made by hand that mentions the stack in its metadata: neither is this stack's.
    await stackRunner(s, { EDGEFORM_STACK: 'other' }).apply(['-f', manifestDir({ 'b.yaml': toYaml([{ kind: 'TunnelGroupBackend', name: 'tg' }]) })]);
    expect((await s.post('/backends/weighted', { metadata: JSON.stringify({ edgeform: 'dropped', note: '"dropped"' }), backends: {} })).status).toBe(201);
    // The backend's kind is no longer declared at all.
    dir = manifestDir({ 'policy.yaml': toYaml([{ kind: 'IPPolicy', name: 'office', rules: [{ cidr: '203.0.113.0/24', action: 'allow' }] }]) });
  });

  afterAll(async () => {
    await s?.close();
  });

  it('its leftovers of the dropped kind are still planned for deletion, read with one call for every undeclared kind', async () => {
    const r = stackRunner(s, { EDGEFORM_STACK: 'dropped' });
    const pruned = await r.planJson(['-f', dir, '--prune']);
    expect(Object.keys(activeChanges(pruned))).toEqual(['HTTPResponseBackend/hello']);
    expect(activeChanges(pruned)['HTTPResponseBackend/hello'].change.actions).toEqual(['delete']);
    // The stack's kinds (1), policies and their rules (1 + 1), the dropped kind's backends (1).
    expect(pruned.api_calls).toBe(4);
    // Without --prune the leftover is named, not deleted.
    const kept = await r.run(['plan', '-f', dir]);
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stdout + kept.stderr).toContain('HTTPResponseBackend/hello');
  });

  it('against a server without the stack kinds extension (404), every kind is read and the deletion is planned alike', async () => {
    const proxy = await startProxy(s.url, {
      open: true,
      answer: ({ method, path }) =>
        path.startsWith('/_edgeform/stack_kinds/') ? { status: 404, body: { error_code: 'ERR_SERVICE_301', status_code: 404, msg: `no such path: ${method} ${path}` } } : undefined,
    });
    try {
      const p = await stackRunner(s, { EDGEFORM_STACK: 'dropped', EDGEFORM_API_URL: proxy.url }).planJson(['-f', dir, '--prune']);
      expect(Object.keys(activeChanges(p))).toEqual(['HTTPResponseBackend/hello']);
      // The refused call counts, then one list or more for each kind a manifest may declare.
      expect(p.api_calls).toBeGreaterThanOrEqual(1 + manifestKinds.length);
    } finally {
      await proxy.close();
    }
  });
});
