// plan --show-unmanaged lists live resources of the declared kinds that no stack manages,
// from the lists the plan read anyway: the same number of API calls as a plain plan.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { stackRunner, toYaml } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('plan --show-unmanaged', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(() => s.close());

  it('names what was made by hand, of the declared kinds only, with no extra API call', async () => {
    const me = stackRunner(s, { EDGEFORM_STACK: 'managed' });
    const dir = manifestDir({ 'a.yaml': toYaml([{ kind: 'IPPolicy', name: 'office', description: 'office' }]) });
    await me.apply(['-f', dir]);
    // Made by hand: an IP policy (a declared kind) and a backend (not declared).
    const byHand = (await s.post('/ip_policies', { description: 'made by hand' })).body;
    await s.post('/backends/http_response', { body: 'by hand' });
    // Managed by another stack: not unmanaged.
    await stackRunner(s, { EDGEFORM_STACK: 'other' }).apply(['-f', manifestDir({ 'b.yaml': toYaml([{ kind: 'IPPolicy', name: 'vpn', description: 'vpn' }]) })]);

    const plain = await me.planJson(['-f', dir]);
    const shown = await me.planJson(['-f', dir, '--show-unmanaged']);
    expect(shown.unmanaged).toEqual([{ kind: 'IPPolicy', id: byHand.id, label: 'made by hand' }]);
    expect(plain.unmanaged).toBeUndefined();
    expect(shown.api_calls).toBe(plain.api_calls);
    const text = await me.run(['plan', '-f', dir, '--show-unmanaged']);
    expect(text.stdout).toContain('Unmanaged resources of the declared kinds (1; no stack manages them');
    expect(text.stdout).toContain(`IPPolicy ${byHand.id}  (made by hand)`);
  });
});
