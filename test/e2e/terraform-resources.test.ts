// Every resource type through the real terraform binary against the real server: create,
// plan-after-apply empty, in-place update, replace, out-of-band change detected and
// repaired, import (blocks and the CLI), destroy. All resources share one configuration,
// so each step is one terraform run (a plan launches the provider three times).
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { catalog } from '../../provider/catalog/index.js';
import { resourceTypes, type ObjectNode } from '../../provider/terraform/schema.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { hasTerraform, workspace, type Workspace } from '../helpers/terraform.js';
import { cases, type Case, type Stage } from './terraform-cases.js';

const address = (c: Case) => `${c.type}.${c.name}`;
const config = (stage: Stage) =>
  cases.map((c) => `resource "${c.type}" "${c.name}" {\n${(c.hcl[stage] ?? c.hcl.v2 ?? c.hcl.v1).trim()}\n}\n`).join('\n');
const kindOfType = (type: string) => resourceTypes.find((r) => r.typeName === type)!.kind;

/** Attributes whose change replaces the resource, by path. */
const replaceFields = (node: ObjectNode, base = ''): string[] => [
  ...node.attributes.filter((a) => a.replace).map((a) => base + a.name),
  ...node.blocks.flatMap((b) => replaceFields(b.block, `${base}${b.name}.`)),
];
const hasReplaceField = (type: string) => replaceFields(resourceTypes.find((r) => r.typeName === type)!.node).length > 0;
/** Replaced by a change of a replace-on-change field (`v3`). */
const replacedByField = cases.filter((c) => c.hcl.v3);
/** The first case of each type that has no replace-on-change field, replaced with `-replace`. */
const replacedOnRequest = cases.filter((c, i) => !hasReplaceField(c.type) && cases.findIndex((o) => o.type === c.type) === i);

describe.skipIf(!hasTerraform)('terraform provider: every resource type', () => {
  let s: TestServer;
  let tf: Workspace;
  let ids: Record<string, Record<string, any>> = {};

  const itemPath = (c: Case, values: Record<string, any>) => {
    const kind = kindOfType(c.type);
    const base = kind.parent?.in === 'path' ? kind.path.replace(`{${kind.parent.field}}`, values[kind.parent.field]) : kind.path;
    return `${base}/${values.id}`;
  };
  const expectPlanned = (out: string, expected: Case[], what: string) => {
    for (const c of expected) expect(out, `${address(c)} ${what}\n${out}`).toContain(`# ${address(c)} ${what}`);
  };
  const expectClean = async () => {
    const r = await tf.plan();
    expect(r.code, r.stdout).toBe(0);
  };

  beforeAll(async () => {
    s = await startTestServer();
    tf = await workspace(s);
  });
  afterAll(async () => {
    await s?.close();
  });
  // Each step builds on the one before; after a failure the rest would only repeat it.
  let broken = false;
  beforeEach((ctx) => {
    if (broken) ctx.skip();
  });
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') broken = true;
  });

  it('covers every resource type the provider has', () => {
    const covered = new Set(cases.map((c) => c.type));
    expect(resourceTypes.map((r) => r.typeName).filter((t) => !covered.has(t))).toEqual([]);
    expect(resourceTypes.length).toBe(catalog.filter((k) => k.operations.includes('create')).length);
    for (const rt of resourceTypes) {
      expect(cases.some((c) => c.type === rt.typeName && c.hcl.v2), `${rt.typeName} changes in place`).toBe(true);
      // A type with a replace-on-change field shows it; one without is replaced on request.
      if (hasReplaceField(rt.typeName)) expect(replacedByField.some((c) => c.type === rt.typeName), `${rt.typeName} replaced by ${replaceFields(rt.node)}`).toBe(true);
      else expect(replacedOnRequest.some((c) => c.type === rt.typeName), `${rt.typeName} replaced on request`).toBe(true);
    }
  });

  it('creates every resource, and the plan after apply is empty', async () => {
    tf.write(config('v1'));
    await tf.apply();
    ids = await tf.state();
    for (const c of cases) {
      const values = ids[address(c)];
      expect(values, address(c)).toBeDefined();
      const live = await s.get(itemPath(c, values));
      expect(live.status, `${address(c)}: ${live.text}`).toBe(200);
      c.checkLive?.(live.body, 'v1');
    }
    await expectClean();
  });

  it('updates in place what can change in place', async () => {
    tf.write(config('v2'));
    const plan = await tf.plan();
    expectPlanned(plan.stdout, cases.filter((c) => c.hcl.v2), 'will be updated in-place');
    expect(plan.stdout).not.toContain('must be replaced');
    // An in-place update leaves unknown only what it may change: not what is read from a
    // certificate that cannot change in place, nor a route's constant policy.
    const unknown = [...plan.stdout.matchAll(/^\s+[~+] (\w+)\s+= \(known after apply\)/gm)].map((m) => m[1]);
    // Of the server-set attributes, only a tunnel-group backend's online tunnels follow an in-place change.
    expect(unknown.filter((name) => name !== 'tunnels'), plan.stdout).toEqual([]);
    await tf.apply();
    const after = await tf.state();
    for (const c of cases.filter((c) => c.hcl.v2)) {
      expect(after[address(c)].id, `${address(c)} kept its id`).toBe(ids[address(c)].id);
      const live = await s.get(itemPath(c, after[address(c)]));
      c.checkLive?.(live.body, 'v2');
    }
    ids = after;
    await expectClean();
  });

  it('replaces what cannot change in place, and every other type on request (-replace)', async () => {
    tf.write(config('v3'));
    const requested = replacedOnRequest.map((c) => `-replace=${address(c)}`);
    const plan = await tf.ok(['plan', '-detailed-exitcode', '-input=false', ...requested], [2]);
    expectPlanned(plan.stdout, replacedByField, 'must be replaced');
    expectPlanned(plan.stdout, replacedOnRequest, 'will be replaced, as requested');
    await tf.ok(['apply', '-auto-approve', '-input=false', ...requested]);
    const after = await tf.state();
    for (const c of [...replacedByField, ...replacedOnRequest]) {
      expect(after[address(c)].id, `${address(c)} was replaced`).not.toBe(ids[address(c)].id);
      expect((await s.get(itemPath(c, ids[address(c)]))).status, `old ${address(c)} is gone`).toBe(404);
    }
    ids = after;
    await expectClean();
  });

  it('detects changes made outside terraform and repairs them', async () => {
    for (const c of cases) {
      const r = await c.outOfBand(s, ids[address(c)], itemPath(c, ids[address(c)]));
      expect(r.status, `${address(c)} out-of-band change: ${r.text}`).toBeLessThan(300);
    }
    const plan = await tf.plan();
    expect(plan.code).toBe(2);
    expectPlanned(plan.stdout, cases.filter((c) => !c.oobDeletes), 'will be updated in-place');
    expectPlanned(plan.stdout, cases.filter((c) => c.oobDeletes), 'will be created');
    await tf.apply();
    ids = await tf.state();
    await expectClean();
  });

  it('imports every resource by id (import blocks), and the plan after is empty', async () => {
    for (const c of cases) await tf.ok(['state', 'rm', address(c)]);
    const imports = cases.map((c) => `import {\n  to = ${address(c)}\n  id = ${JSON.stringify(importId(c, ids[address(c)]))}\n}\n`).join('\n');
    tf.write(`${config('v3')}\n${imports}`);
    const plan = await tf.plan();
    // Write-only values never come back from the API, so an import adopts them from the
    // configuration: an in-place change for each resource that has one, and nothing else.
    const adopting = cases.filter((c) => c.adoptsSecret);
    expect(plan.stdout).toContain(`Plan: ${cases.length} to import, 0 to add, ${adopting.length} to change, 0 to destroy.`);
    expectPlanned(plan.stdout, adopting, 'will be updated in-place');
    expect(plan.stdout).not.toContain('known after apply');
    await tf.apply();
    tf.write(config('v3'));
    await expectClean();
  });

  it('imports with the CLI: a route as <edge id>/<route id>, a top-level resource by its id; refuses a malformed id', async () => {
    const child = cases.find((c) => kindOfType(c.type).parent?.in === 'path' && !c.adoptsSecret)!;
    const values = ids[address(child)];
    await tf.ok(['state', 'rm', address(child)]);
    const bad = await tf.run('import', address(child), values.id);
    expect(bad.code).toBe(1);
    expect(bad.stderr + bad.stdout).toMatch(/imports by "<\w+>\/<id>"/);
    await tf.ok(['import', address(child), importId(child, values)]);
    // A top-level resource imports by its bare id (import blocks above did every type).
    const top = cases.find((c) => !kindOfType(c.type).parent && !c.adoptsSecret)!;
    await tf.ok(['state', 'rm', address(top)]);
    await tf.ok(['import', address(top), ids[address(top)].id]);
    await expectClean();
  });

  it('destroys everything it made, and a resource already gone counts as destroyed', async () => {
    // Without a refresh terraform still holds the subscription, so the provider deletes one that is missing.
    const gone = cases.find((c) => c.type === 'edgeform_event_subscription')!;
    expect((await s.del(itemPath(gone, ids[address(gone)]))).status).toBe(204);
    const before = s.logs.length;
    await tf.ok(['destroy', '-auto-approve', '-refresh=false']);
    const deletes = s.logs.slice(before).map((l) => JSON.parse(l)).filter((l) => l.method === 'DELETE' && l.path === itemPath(gone, ids[address(gone)]));
    expect(deletes.map((l) => l.status)).toEqual([404]);
    for (const c of cases) {
      const r = await s.get(itemPath(c, ids[address(c)]));
      expect(r.status, `${address(c)} after destroy`).toBe(404);
    }
  });
});

function importId(c: Case, values: Record<string, any>) {
  const kind = kindOfType(c.type);
  return kind.parent?.in === 'path' ? `${values[kind.parent.field]}/${values.id}` : values.id;
}
