// Children (IP policy rules, HTTPS edge routes) changed outside edgeform are shown as drift,
// as top-level resources are: each child carries a stamp with the hash of what was applied.
// A change made in the manifest is an ordinary update; a child stamped by an older version
// (no hash) is not flagged and gets the hash on its next update; the user's own metadata
// is kept and diffed beside the stamp; a stamp that would push a child's metadata over the
// limit is left out rather than refusing the manifest. Steps run in order on one server.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { activeChanges, NO_CHANGES, stackRunner, toYaml, type StackRunner } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

const RULE = 'IPPolicy/office.rules["203.0.113.0/24"]';
const ROUTE = 'HTTPSEdge/web.routes["/"]';
const API_ROUTE = 'HTTPSEdge/web.routes["/api"]';

const docs = (o: { ruleDescription?: string; apiDescription?: string; bigMetadata?: string } = {}): Doc[] => [
  {
    kind: 'IPPolicy',
    name: 'office',
    rules: [
      { cidr: '203.0.113.0/24', action: 'allow', description: o.ruleDescription ?? 'HQ', metadata: '{"owner":"net"}' },
      { cidr: '198.51.100.0/24', action: 'allow', metadata: o.bigMetadata ?? 'plain text' },
    ],
  },
  { kind: 'HTTPResponseBackend', name: 'hello', body: 'hello' },
  { kind: 'EventDestination', name: 'hook', target: { http: { url: 'https://hooks.example.com/in', secret: '${env:HOOK_SECRET}' } } },
  {
    kind: 'HTTPSEdge',
    name: 'web',
    hostports: ['drift.example.com:443'],
    routes: [
      { match_type: 'path_prefix', match: '/', backend: { backend_id: 'HTTPResponseBackend/hello' }, ip_restriction: { ip_policy_ids: ['IPPolicy/office'] } },
      { match_type: 'path_prefix', match: '/api', description: o.apiDescription ?? 'api', backend: { backend_id: 'HTTPResponseBackend/hello' } },
      { match_type: 'exact_path', match: '/hooks', backend: { backend_id: 'HTTPResponseBackend/hello' }, webhook_verification: { provider: 'stripe', secret: '${env:HOOK_SECRET}' } },
    ],
  },
];

describe('reconciler: drift of children', () => {
  let s: TestServer;
  let r: StackRunner;
  let dir: string;
  const write = (o: Parameters<typeof docs>[0] = {}) => fs.writeFileSync(path.join(dir, 'stack.yaml'), toYaml(docs(o)));

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s, { HOOK_SECRET: 'whsec_first' });
    dir = manifestDir({});
    write();
    await r.apply(['-f', dir]);
  });
  afterAll(async () => {
    await s?.close();
  });

  const edge = async () => (await s.get('/edges/https')).body.https_edges[0];
  const route = async (match: string) => (await edge()).routes.find((x: Doc) => x.match === match);
  const rule = async (cidr: string) => (await s.get('/ip_policy_rules')).body.ip_policy_rules.find((x: Doc) => x.cidr === cidr);
  const routePath = async (match: string) => `/edges/https/${(await edge()).id}/routes/${(await route(match)).id}`;
  const stampOf = (metadata: string) => JSON.parse(metadata).edgeform;

  it('stamps every child with the hash of what was applied, next to the user\'s metadata', async () => {
    const r1 = await rule('203.0.113.0/24');
    expect(JSON.parse(r1.metadata)).toEqual({ owner: 'net', edgeform: { stack: 'default', h: expect.stringMatching(/^[\w-]{22}$/) } });
    expect(stampOf((await rule('198.51.100.0/24')).metadata)).toEqual({ stack: 'default', h: expect.any(String), text: 'plain text' });
    expect(stampOf((await route('/')).metadata)).toEqual({ stack: 'default', h: expect.any(String) });
    // Equal bodies in different places hash differently (the salt is the address).
    expect(stampOf((await route('/')).metadata).h).not.toBe(stampOf((await route('/api')).metadata).h);
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code).toBe(0);
  });

  it.each<{ case: string; address: string; change: () => Promise<void>; shown: string }>([
    { case: 'a rule PATCHed', address: RULE, change: async () => void expect((await s.patch(`/ip_policy_rules/${(await rule('203.0.113.0/24')).id}`, { description: 'by hand' })).status).toBe(200), shown: '~ description = "by hand" -> "HQ"' },
    { case: 'a route PATCHed', address: API_ROUTE, change: async () => void expect((await s.patch(await routePath('/api'), { description: 'by hand' })).status).toBe(200), shown: '~ description = "by hand" -> "api"' },
    { case: 'a route module DELETEd', address: ROUTE, change: async () => void expect((await s.del(`${await routePath('/')}/ip_restriction`)).status).toBe(204), shown: '+ ip_restriction = {' },
    {
      case: "a rule's own metadata PATCHed (the stamp kept)",
      address: RULE,
      change: async () => {
        const r1 = await rule('203.0.113.0/24');
        const meta = { ...JSON.parse(r1.metadata), owner: 'someone else' };
        expect((await s.patch(`/ip_policy_rules/${r1.id}`, { metadata: JSON.stringify(meta) })).status).toBe(200);
      },
      shown: '~ metadata = "{\\"owner\\":\\"someone else\\"}" -> "{\\"owner\\":\\"net\\"}"',
    },
  ])('$case: shown as drift (text and JSON, refresh-only too), then put back', async ({ address, change, shown }) => {
    await change();
    const text = await r.run(['plan', '-f', dir]);
    expect(text.stdout).toContain('Note: Objects have changed outside edgeform');
    expect(text.stdout).toContain(`${address} changed since the last apply`);
    expect(text.stdout).toContain(`# ${address} will be updated in-place (changed outside edgeform since the last apply)`);
    expect(text.stdout).toContain(shown);
    const json = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.keys(json)).toEqual([address]);
    expect(json[address]).toMatchObject({ drift: true, change: { actions: ['update'] } });
    const refreshOnly = activeChanges(await r.planJson(['-f', dir, '--refresh-only']));
    expect(Object.keys(refreshOnly)).toEqual([address]);
    await r.apply(['-f', dir]);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('a child changed in the manifest is an update, not drift, even when it was also changed by hand', async () => {
    write({ ruleDescription: 'headquarters', apiDescription: 'the API' });
    expect((await s.patch(await routePath('/api'), { description: 'by hand' })).status).toBe(200);
    const json = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.keys(json).sort()).toEqual([API_ROUTE, RULE].sort());
    for (const c of Object.values(json)) expect(c.drift).toBeUndefined();
    expect((await r.run(['plan', '-f', dir])).stdout).not.toContain('changed outside edgeform');
    await r.apply(['-f', dir]);
    expect((await rule('203.0.113.0/24')).description).toBe('headquarters');
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
    // The new hash was written: a later change by hand is drift again.
    expect((await s.patch(await routePath('/api'), { description: 'by hand again' })).status).toBe(200);
    expect(activeChanges(await r.planJson(['-f', dir]))[API_ROUTE]).toMatchObject({ drift: true });
    await r.apply(['-f', dir]);
  });

  it.each<{ case: string; metadata: (stack: string) => string }>([
    { case: 'a stamp without a hash (an older edgeform)', metadata: () => JSON.stringify({ edgeform: { stack: 'default' } }) },
    { case: 'no stamp at all (an older edgeform stamped only children with secrets)', metadata: () => '' },
  ])('$case: a change is not flagged as drift, and the next update writes the hash', async ({ metadata }) => {
    const path_ = await routePath('/api');
    expect((await s.patch(path_, { metadata: metadata('default'), description: 'old' })).status).toBe(200);
    const json = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.keys(json)).toEqual([API_ROUTE]);
    expect(json[API_ROUTE].drift).toBeUndefined();
    expect(json[API_ROUTE].change).toMatchObject({ actions: ['update'], before: { description: 'old' }, after: { description: 'the API' } });
    await r.apply(['-f', dir]);
    expect(stampOf((await route('/api')).metadata)).toEqual({ stack: 'default', h: expect.stringMatching(/^[\w-]{22}$/) });
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it("a child whose own metadata leaves no room for the stamp keeps its metadata verbatim, unstamped, and plans no changes", async () => {
    const big = 'x'.repeat(4096 - 10);
    write({ ruleDescription: 'headquarters', apiDescription: 'the API', bigMetadata: big });
    const applied = await r.apply(['-f', dir]);
    expect(applied.stdout).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
    expect((await rule('198.51.100.0/24')).metadata).toBe(big);
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code).toBe(0);
  });

  it('a secret changed in the manifest is an update with a sensitive change, not drift (top level and child)', async () => {
    r.env.HOOK_SECRET = 'whsec_second';
    const json = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.fromEntries(Object.entries(json).map(([a, c]) => [a, [c.change.actions, c.change.sensitive_changed, c.drift]]))).toEqual({
      'EventDestination/hook': [['update'], true, undefined],
      'HTTPSEdge/web.routes["/hooks"]': [['update'], true, undefined],
    });
    await r.apply(['-f', dir]);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
    expect(r.outputs.join('\n')).not.toMatch(/whsec_(first|second)/);
  });
});
