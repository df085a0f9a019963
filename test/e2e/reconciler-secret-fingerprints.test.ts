// The stamp's `s` (readable by any API key) must not let a reader test guesses at a secret
// offline: it is an HMAC made by the server under a key only the server holds. A changed
// secret still plans an update; stamps in the old unkeyed form migrate without a change;
// a server without the extension gets no fingerprint at all; guesses through the endpoint
// are limited per key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { decodeMetadata, encodeMetadata, fingerprint } from '../../reconciler/live/stamp.js';
import { expectError } from '../helpers/api.js';
import { manifestDir } from '../helpers/cli.js';
import { startProxy } from '../helpers/proxy.js';
import { NO_CHANGES, stackRunner, toYaml } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;

const HOOK = 'EventDestination/hook';
const ROUTE = 'HTTPSEdge/web.routes["/hooks"]';
const HOOK_VALUES = (secret: string) => ({ 'target.http.secret': secret });
const ROUTE_VALUES = (secret: string) => ({ 'webhook_verification.secret': secret });

function manifest(host: string, description = 'signed hooks') {
  return manifestDir({
    'stack.yaml': toYaml([
      { kind: 'EventDestination', name: 'hook', description, target: { http: { url: 'https://hooks.example.com/in', secret: '${env:HOOK_SECRET}' } } },
      { kind: 'HTTPResponseBackend', name: 'ok', body: 'ok', status_code: 200 },
      {
        kind: 'HTTPSEdge',
        name: 'web',
        hostports: [`${host}:443`],
        routes: [{ match_type: 'exact_path', match: '/hooks', backend: { backend_id: 'HTTPResponseBackend/ok' }, webhook_verification: { provider: 'stripe', secret: '${env:HOOK_SECRET}' } }],
      },
    ]),
  });
}

/** The old, unkeyed `s`: computable by anyone from the stack, the address and a guess. */
const unkeyed = (stack: string, address: string, values: Doc) => fingerprint(`${stack}\u0000${address}#s`, values);

/** The live stamps of the stack's destination and route, with their ids. */
async function stamps(s: TestServer, stack: string) {
  const hook = (await s.get('/event_destinations')).body.event_destinations.find((d: Doc) => decodeMetadata(d.metadata).stamp?.stack === stack);
  const edge = (await s.get('/edges/https')).body.https_edges.find((e: Doc) => decodeMetadata(e.metadata).stamp?.stack === stack);
  const route = edge.routes[0];
  return { hook, edge, route, hookS: decodeMetadata(hook.metadata).stamp!.s!, routeS: decodeMetadata(route.metadata).stamp!.s! };
}

/** Rewrites a live stamp's `s`, as an older edgeform would have written it. */
async function setS(s: TestServer, path: string, metadata: string, value: string) {
  const { stamp, user } = decodeMetadata(metadata);
  expect((await s.patch(path, { metadata: encodeMetadata(user, { ...stamp!, s: value }) })).status).toBe(200);
}

describe('reconciler: secret fingerprints', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('the same secret in two stacks gets two fingerprints, neither computable from what readers see, and another server key gives another', async () => {
    const env = { HOOK_SECRET: 'password123' };
    const a = stackRunner(s, { EDGEFORM_STACK: 'teama', ...env });
    const b = stackRunner(s, { EDGEFORM_STACK: 'teamb', ...env });
    await a.apply(['-f', manifest('a.example.com')]);
    await b.apply(['-f', manifest('b.example.com')]);
    const sa = await stamps(s, 'teama');
    const sb = await stamps(s, 'teamb');
    for (const v of [sa.hookS, sa.routeS, sb.hookS, sb.routeS]) expect(v).toMatch(/^k1\.[A-Za-z0-9_-]{22}$/);
    expect(new Set([sa.hookS, sa.routeS, sb.hookS, sb.routeS]).size).toBe(4);
    // The old scheme's guess test (salt = stack and address, both readable) no longer matches.
    expect(sa.hookS).not.toContain(unkeyed('teama', HOOK, HOOK_VALUES('password123')));
    expect(sa.routeS).not.toContain(unkeyed('teama', ROUTE, ROUTE_VALUES('password123')));
    // Nothing readable carries a hash of the secret: the whole resource, as any key reads it.
    const readable = JSON.stringify([sa.hook, sa.edge]);
    expect(readable).not.toContain('password123');
    expect(readable).not.toContain(unkeyed('teama', HOOK, HOOK_VALUES('password123')));
    // Same stack, address and secret on a server with another key: another fingerprint, so
    // the fingerprint depends on something only the server holds.
    const other = await startTestServer({ secretKey: randomBytes(32).toString('hex') });
    try {
      await stackRunner(other, { EDGEFORM_STACK: 'teama', ...env }).apply(['-f', manifest('a.example.com')]);
      const so = await stamps(other, 'teama');
      expect(so.hookS).toMatch(/^k1\./);
      expect(so.hookS).not.toBe(sa.hookS);
      expect(so.routeS).not.toBe(sa.routeS);
    } finally {
      await other.close();
    }
  });

  it('a changed secret plans an update of each resource holding it, and after apply no changes', async () => {
    const dir = manifest('a.example.com');
    const a = stackRunner(s, { EDGEFORM_STACK: 'teama', HOOK_SECRET: 'correct-horse-battery' });
    const plan = await a.run(['plan', '-f', dir, '--json']);
    const changes = Object.fromEntries(plan.json().resource_changes.map((c: Doc) => [c.address, c.change]));
    expect(changes[HOOK]).toMatchObject({ actions: ['update'], sensitive_changed: true });
    expect(changes[ROUTE]).toMatchObject({ actions: ['update'], sensitive_changed: true });
    await a.apply(['-f', dir]);
    expect((await a.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('a stamp in the old unkeyed form migrates: equal secrets plan no change (with a warning), the next update writes the keyed form, a different secret plans an update', async () => {
    const secret = 'correct-horse-battery';
    const a = stackRunner(s, { EDGEFORM_STACK: 'teama', HOOK_SECRET: secret });
    const live = await stamps(s, 'teama');
    await setS(s, `/event_destinations/${live.hook.id}`, live.hook.metadata, unkeyed('teama', HOOK, HOOK_VALUES(secret)));
    await setS(s, `/edges/https/${live.edge.id}/routes/${live.route.id}`, live.route.metadata, unkeyed('teama', ROUTE, ROUTE_VALUES(secret)));
    const plan = await a.run(['plan', '-f', manifest('a.example.com'), '--detailed-exitcode']);
    expect(plan.code, plan.stdout + plan.stderr).toBe(0);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.stderr).toContain('old, unkeyed fingerprint');
    expect(plan.stderr).toContain(HOOK);
    expect(plan.stderr).toContain(ROUTE);
    // An update of the destination for another reason writes its keyed fingerprint.
    const applied = await a.apply(['-f', manifest('a.example.com', 'signed hooks, v2')]);
    expect(applied.stdout).toContain('0 added, 1 changed, 0 destroyed');
    const after = await stamps(s, 'teama');
    expect(after.hookS).toBe(live.hookS);
    expect(after.routeS).toBe(unkeyed('teama', ROUTE, ROUTE_VALUES(secret)));
    expect(applied.stderr).toContain(ROUTE);
    // An old stamp of a secret since changed plans the update.
    await setS(s, `/edges/https/${after.edge.id}/routes/${after.route.id}`, after.route.metadata, unkeyed('teama', ROUTE, ROUTE_VALUES('an-older-secret')));
    const changed = await a.planJson(['-f', manifest('a.example.com', 'signed hooks, v2')]);
    const route = changed.resource_changes.find((c: Doc) => c.address === ROUTE);
    expect(route.change).toMatchObject({ actions: ['update'], sensitive_changed: true });
    await a.apply(['-f', manifest('a.example.com', 'signed hooks, v2')]);
    expect((await stamps(s, 'teama')).routeS).toBe(live.routeS);
  });

  it('against a server without the extension: no fingerprint is written, secrets are taken as unchanged with a warning, and the keyed form comes with the next update', async () => {
    const proxy = await startProxy(s.url, { open: true, answer: ({ method, path }) =>
      path === '/_edgeform/fingerprints' ? { status: 404, body: { error_code: 'ERR_SERVICE_301', status_code: 404, msg: `no such path: ${method} ${path}` } } : undefined,
    });
    try {
      const dir = manifest('c.example.com');
      const old = stackRunner(s, { EDGEFORM_STACK: 'teamc', EDGEFORM_API_URL: proxy.url, HOOK_SECRET: 'first-secret' });
      const applied = await old.apply(['-f', dir]);
      expect(applied.stderr).toContain('the server has no secret fingerprints');
      const live = await stamps(s, 'teamc');
      expect([live.hookS, live.routeS]).toEqual(['unknown', 'unknown']);
      expect(JSON.stringify([live.hook, live.edge])).not.toContain(unkeyed('teamc', HOOK, HOOK_VALUES('first-secret')));
      // A changed secret cannot be seen there: no change, and the warning says why.
      const plan = await old.run(['plan', '-f', dir], { HOOK_SECRET: 'second-secret' });
      expect(plan.stdout).toContain(NO_CHANGES);
      expect(plan.stderr).toContain('taken as unchanged');
      // The server itself (with the extension): unknown is no change, until an update writes the keyed form.
      const now = stackRunner(s, { EDGEFORM_STACK: 'teamc', HOOK_SECRET: 'first-secret' });
      expect((await now.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
      await now.apply(['-f', manifest('c.example.com', 'changed')]);
      expect((await stamps(s, 'teamc')).hookS).toMatch(/^k1\./);
    } finally {
      await proxy.close();
    }
  });
});

describe('POST /_edgeform/fingerprints', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ fingerprintRateLimit: 3 });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('answers one keyed fingerprint per item, refuses a bad body, and limits guesses per key with 429', async () => {
    const items = [
      { address: HOOK, values: HOOK_VALUES('password123') },
      { address: HOOK, values: HOOK_VALUES('password124') },
    ];
    const ok = await s.post('/_edgeform/fingerprints', { stack: 'default', items });
    expect(ok.status).toBe(200);
    expect(ok.body.fingerprints).toHaveLength(2);
    expect(ok.body.fingerprints[0]).toMatch(/^k1\./);
    expect(ok.body.fingerprints[0]).not.toBe(ok.body.fingerprints[1]);
    expectError(await s.post('/_edgeform/fingerprints', { stack: 'default', items: [] }), 400, 'ERR_SERVICE_103');
    expectError(await s.post('/_edgeform/fingerprints', { items }), 400, 'ERR_SERVICE_103');
    // 2 of 3 taken: 2 more are over the budget.
    const limited = await s.post('/_edgeform/fingerprints', { stack: 'default', items });
    expectError(limited, 429, 'ERR_SERVICE_228');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // The reconciler says so at once, rather than waiting an hour.
    const plan = await stackRunner(s, { HOOK_SECRET: 'password123' }).run(['plan', '-f', manifest('d.example.com')]);
    expect(plan.code).toBe(1);
    expect(plan.stderr).toContain('ERR_SERVICE_228');
  });
});
