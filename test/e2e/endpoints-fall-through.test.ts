// A cloud endpoint's request that no rule ends (the API refuses such a policy, so here the
// table is made by hand, as data written before a change of the language would give it): the
// ingress answers ERR_SERVICE_760 rather than hang or reach some upstream, and a rule whose
// expression cannot be evaluated counts as not matching on the way there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileCloudEndpoints } from '../../server/ingress/cloud-endpoints.js';
import { startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';

let ing: HttpIngress;
const row = (id: string, url: string, policy: unknown) => ({ id, kind: 'CloudEndpoint', parentId: null, createdAt: new Date(), doc: { url, traffic_policy: JSON.stringify(policy) }, computed: {} });

beforeAll(async () => {
  const table = tableOf({ edges: [] });
  table.cloudEndpoints = compileCloudEndpoints([
    row('ep_open', 'https://open.example.com', { on_http_request: [{ expressions: ["req.path == '/x'"], actions: [{ type: 'custom-response', config: { status_code: 200, body: 'x' } }] }] }),
  ]);
  ing = await startHttpIngress(table);
});
afterAll(() => ing.close());

describe('a request no rule of a cloud endpoint ends', () => {
  it('gets 502 ERR_SERVICE_760 naming the endpoint; a request a rule ends gets its answer', async () => {
    const x = await ing.get('/x', { host: 'open.example.com' });
    expect(x.status).toBe(200);
    expect(x.text).toBe('x');
    const r = await ing.get('/elsewhere', { host: 'open.example.com' });
    expect(r.status).toBe(502);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_760');
    expect(r.text).toContain('ep_open');
    expect(ing.logs.at(-1)).toMatchObject({ route: 'ep_open', status: 502, code: 'ERR_SERVICE_760' });
  });
});
