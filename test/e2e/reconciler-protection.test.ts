// prevent_destroy outlives the document (hashicorp/terraform#17599): it is recorded in the
// resource's stamp when applied, so deleting the document from the manifests does not let
// --prune or destroy delete the resource; declaring it again with prevent_destroy: false
// and applying lifts it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeMetadata } from '../../reconciler/live/stamp.js';
import { manifestDir } from '../helpers/cli.js';
import { stackRunner, toYaml } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('reconciler: prevent_destroy recorded in the stamp', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(() => s.close());

  const policy = async () => (await s.get('/ip_policies')).body.ip_policies.find((p: any) => p.description === 'keep me');

  it('survives the deletion of the document, for --prune and destroy, until lifted explicitly', async () => {
    const me = stackRunner(s, { EDGEFORM_STACK: 'protected' });
    const keep = { kind: 'IPPolicy', name: 'keep', description: 'keep me' };
    const other = { kind: 'IPPolicy', name: 'other', description: 'other' };
    await me.apply(['-f', manifestDir({ 'a.yaml': toYaml([{ ...keep, prevent_destroy: true }, other]) })]);
    expect(decodeMetadata((await policy()).metadata).stamp?.p).toBe(true);

    const without = manifestDir({ 'a.yaml': toYaml([other]) });
    const prune = await me.run(['apply', '-f', without, '--prune', '--auto-approve']);
    expect(prune.code).toBe(1);
    expect(prune.stderr).toContain('IPPolicy/keep is protected by prevent_destroy, recorded when it was last applied');
    expect(await policy()).toBeDefined();
    const destroy = await me.run(['destroy', '-f', without, '--auto-approve']);
    expect(destroy.code).toBe(1);
    expect(await policy()).toBeDefined();

    // Lifting it is explicit: the document again, with prevent_destroy: false, applied (a stamp-only update).
    const lifted = manifestDir({ 'a.yaml': toYaml([{ ...keep, prevent_destroy: false }, other]) });
    const plan = await me.planJson(['-f', lifted]);
    expect(plan.resource_changes.find((c: any) => c.address === 'IPPolicy/keep').change.actions).toEqual(['update']);
    await me.apply(['-f', lifted]);
    expect(decodeMetadata((await policy()).metadata).stamp?.p).toBeUndefined();
    await me.apply(['-f', without, '--prune']);
    expect(await policy()).toBeUndefined();
  });
});
