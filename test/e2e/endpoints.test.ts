// The endpoints collection through the API (issue 36): cloud endpoints made, read, listed
// with the service's CEL filter, changed and deleted; the service's rules refused with the
// field named (a policy that can fall through, bindings against the host, a URL taken
// without pooling); agents' endpoints are in the same collection (endpoints-agents.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, ID, RFC3339, unknownId } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

const ANSWER = JSON.stringify({ on_http_request: [{ actions: [{ type: 'custom-response', config: { status_code: 200, body: 'hello' } }] }] });
const CLOSE = JSON.stringify({ on_tcp_connect: [{ actions: [{ type: 'deny' }] }] });

let n = 0;
const host = () => `app${++n}.endpoints.example`;

describe('cloud endpoints', () => {
  it('create, read, list, PATCH, DELETE; the service\'s field names', async () => {
    const url = `https://${host()}`;
    const r = await s.post('/endpoints', { url, type: 'cloud', traffic_policy: ANSWER, description: 'd', metadata: '{"m":1}' });
    expect(r.status, r.text).toBe(201);
    const ep = r.body;
    expect(ep.id).toMatch(ID);
    expect(ep.id.startsWith('ep_')).toBe(true);
    expect(ep.created_at).toMatch(RFC3339);
    expect(ep).toMatchObject({
      uri: `${s.url}/endpoints/${ep.id}`, type: 'cloud', url, public_url: url, proto: 'https', hostport: `${url.slice(8)}:443`,
      traffic_policy: ANSWER, bindings: ['public'], pooling_enabled: false, description: 'd', metadata: '{"m":1}',
      upstream_url: null, tunnel: null, tunnel_session: null,
    });
    expect((await s.get(`/endpoints/${ep.id}`)).body).toEqual(ep);
    expect((await s.get('/endpoints')).body.endpoints.map((e: { id: string }) => e.id)).toContain(ep.id);
    const p = await s.request('PATCH', `/endpoints/${ep.id}`, { description: 'changed' });
    expect(p.status, p.text).toBe(200);
    expect(p.body).toEqual({ ...ep, description: 'changed' });
    expect((await s.request('DELETE', `/endpoints/${ep.id}`)).status).toBe(204);
    expectError(await s.get(`/endpoints/${ep.id}`), 404, 'ERR_SERVICE_300');
  });

  it.each([
    { reason: 'type may be left out (the Terraform resource does)', body: { url: 'https://Left-Out.endpoints.example/', traffic_policy: ANSWER }, want: { type: 'cloud', url: 'https://left-out.endpoints.example' } },
    { reason: 'a default port is dropped from the URL', body: { url: 'https://port.endpoints.example:443', traffic_policy: ANSWER }, want: { url: 'https://port.endpoints.example', hostport: 'port.endpoints.example:443' } },
    { reason: 'another port stays', body: { url: 'http://port.endpoints.example:8080', traffic_policy: ANSWER }, want: { url: 'http://port.endpoints.example:8080', proto: 'http' } },
    { reason: 'tcp, with its port and an on_tcp_connect policy', body: { url: 'tcp://tcp.endpoints.example:9000', traffic_policy: CLOSE }, want: { proto: 'tcp', hostport: 'tcp.endpoints.example:9000' } },
    { reason: 'tls, port 443 by default', body: { url: 'tls://tls.endpoints.example', traffic_policy: CLOSE }, want: { proto: 'tls', hostport: 'tls.endpoints.example:443' } },
    { reason: 'a .internal host binds internal when bindings are left out', body: { url: 'https://api.internal', traffic_policy: ANSWER }, want: { bindings: ['internal'] } },
    { reason: 'a YAML policy, rules ending with an unconditional one', body: { url: 'https://yaml.endpoints.example', traffic_policy: 'on_http_request:\n  - expressions: ["req.path == \'/x\'"]\n    actions: [{type: deny}]\n  - actions: [{type: redirect, config: {to: "https://example.com/"}}]\n' }, want: {} },
  ])('accepted: $reason', async ({ body, want }) => {
    const r = await s.post('/endpoints', body);
    expect(r.status, r.text).toBe(201);
    expect(r.body).toMatchObject(want);
    expect((await s.request('DELETE', `/endpoints/${r.body.id}`)).status).toBe(204);
  });

  it.each([
    { reason: 'no rule ends the request', field: 'traffic_policy', policy: { on_http_request: [{ actions: [{ type: 'add-headers', config: { headers: { a: 'b' } } }] }] }, says: /on_http_request\[0\] can fall through: it has no terminating action/ },
    { reason: 'the last rule has expressions', field: 'traffic_policy', policy: { on_http_request: [{ name: 'only-x', expressions: ["req.path == '/x'"], actions: [{ type: 'deny' }] }] }, says: /on_http_request\[0\] \(only-x\) can fall through: it has expressions/ },
    { reason: 'only a rate limit', field: 'traffic_policy', policy: { on_http_request: [{ actions: [{ type: 'rate-limit', config: { name: 'r', algorithm: 'sliding_window', capacity: 10, rate: '60s', bucket_key: ['conn.client_ip'] } }] }] }, says: /can fall through/ },
    { reason: 'a redirect with from ends only the URLs that match it', field: 'traffic_policy', policy: { on_http_request: [{ actions: [{ type: 'redirect', config: { from: '^https://old\\.', to: 'https://new.example.com/' } }] }] }, says: /on_http_request\[0\] can fall through: it has no terminating action/ },
    { reason: 'no phase for requests at all', field: 'traffic_policy', policy: { on_http_response: [{ actions: [{ type: 'deny' }] }] }, says: /on_http_request has no rule/ },
    { reason: 'an HTTP phase on a TCP endpoint', field: 'traffic_policy', url: 'tcp://t.endpoints.example:9001', policy: { on_http_request: [{ actions: [{ type: 'deny' }] }] }, says: /on_tcp_connect only/ },
    { reason: 'a route module\'s action, which runs on an edge\'s route only', field: 'traffic_policy', policy: { on_http_request: [{ actions: [{ type: 'module-ip-restriction', config: { ip_policy_ids: [] } }, { type: 'deny' }] }] }, says: /module-ip-restriction is a route module's action: it runs on an edge's route only/ },
  ])('refused at create, naming the rule: $reason', async ({ field, policy, says, url }) => {
    const body = expectInvalid(await s.post('/endpoints', { url: url ?? `https://${host()}`, traffic_policy: JSON.stringify(policy) }), field);
    expect(body.msg).toMatch(says);
  });

  it.each([
    { reason: 'no traffic policy', body: { url: 'https://np.endpoints.example' }, field: 'traffic_policy' },
    { reason: 'a scheme that is not https, http, tcp or tls', body: { url: 'ftp://x.endpoints.example', traffic_policy: ANSWER }, field: 'url' },
    { reason: 'a path', body: { url: 'https://x.endpoints.example/api', traffic_policy: ANSWER }, field: 'url' },
    { reason: 'tcp without a port', body: { url: 'tcp://x.endpoints.example', traffic_policy: CLOSE }, field: 'url' },
    { reason: 'internal binding on a public host', body: { url: 'https://x.endpoints.example', bindings: ['internal'], traffic_policy: ANSWER }, field: 'bindings' },
    { reason: 'public binding on a .internal host', body: { url: 'https://x.internal', bindings: ['public'], traffic_policy: ANSWER }, field: 'bindings' },
    { reason: 'type agent (agents make those)', body: { url: 'https://x.endpoints.example', type: 'agent', traffic_policy: ANSWER }, field: 'type' },
  ])('refused: $reason', async ({ body, field }) => {
    expectInvalid(await s.post('/endpoints', body), field);
  });

  it('the same URL twice: 409 unless both pool', async () => {
    const url = `https://${host()}`;
    const a = await s.post('/endpoints', { url, traffic_policy: ANSWER });
    expect(a.status).toBe(201);
    const dup = expectError(await s.post('/endpoints', { url: `${url}:443`, traffic_policy: ANSWER }), 409, 'ERR_SERVICE_320');
    expect(dup.details).toMatchObject({ field: 'url', conflicting_id: a.body.id });
    // Pooling on one side only is still a conflict.
    expectError(await s.post('/endpoints', { url, traffic_policy: ANSWER, pooling_enabled: true }), 409, 'ERR_SERVICE_320');
    expect((await s.request('PATCH', `/endpoints/${a.body.id}`, { pooling_enabled: true })).status).toBe(200);
    const b = await s.post('/endpoints', { url, traffic_policy: ANSWER, pooling_enabled: true });
    expect(b.status, b.text).toBe(201);
    // Leaving the pool while another member holds the URL is refused the same way.
    expectError(await s.request('PATCH', `/endpoints/${a.body.id}`, { pooling_enabled: false }), 409, 'ERR_SERVICE_320');
  });

  it('a URL an edge serves: 409 naming the edge', async () => {
    const h = host();
    const edge = await s.post('/edges/https', { hostports: [`${h}:443`] });
    expect(edge.status, edge.text).toBe(201);
    const r = expectError(await s.post('/endpoints', { url: `https://${h}`, traffic_policy: ANSWER }), 409, 'ERR_SERVICE_320');
    expect(r.details.conflicting_id).toBe(edge.body.id);
  });

  it('PATCH re-checks the policy against the URL', async () => {
    const r = await s.post('/endpoints', { url: `https://${host()}`, traffic_policy: ANSWER });
    expectInvalid(await s.request('PATCH', `/endpoints/${r.body.id}`, { traffic_policy: JSON.stringify({ on_http_request: [] }) }), 'traffic_policy');
    expectInvalid(await s.request('PATCH', `/endpoints/${r.body.id}`, { url: 'tcp://x.endpoints.example:9100' }), 'traffic_policy');
    expectInvalid(await s.request('PATCH', `/endpoints/${r.body.id}`, { type: 'agent' }), 'type');
  });
});

describe('filter on lists', () => {
  it('keeps the items whose CEL expression over obj holds, and pages with it', async () => {
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await s.post('/endpoints', { url: `https://${host()}`, traffic_policy: ANSWER, metadata: 'filtered' })).body.id);
    const f = encodeURIComponent('obj.type == "cloud" && obj.metadata == "filtered"');
    const all = await s.get(`/endpoints?filter=${f}`);
    expect(all.status, all.text).toBe(200);
    expect(all.body.endpoints.map((e: { id: string }) => e.id)).toEqual([...made].reverse());
    const first = await s.get(`/endpoints?filter=${f}&limit=2`);
    expect(first.body.endpoints).toHaveLength(2);
    expect(first.body.next_page_uri).toContain(`&filter=${f}`);
    const rest = await s.get(first.body.next_page_uri.slice(s.url.length));
    expect(rest.body.endpoints.map((e: { id: string }) => e.id)).toEqual([made[0]]);
    expect(rest.body.next_page_uri).toBeNull();
    // Other lists take it too.
    const pol = await s.post('/ip_policies', { description: 'findme' });
    const ipp = await s.get(`/ip_policies?filter=${encodeURIComponent('obj.description.startsWith("find")')}`);
    expect(ipp.body.ip_policies.map((e: { id: string }) => e.id)).toEqual([pol.body.id]);
  });

  it.each([
    { reason: 'not CEL', filter: 'obj.type ==' },
    { reason: 'not a bool', filter: '1 + 2' },
    { reason: 'an unknown variable', filter: 'other.type == "cloud"' },
  ])('refused: $reason', async ({ filter }) => {
    expectInvalid(await s.get(`/endpoints?filter=${encodeURIComponent(filter)}`), 'filter', 'ERR_SERVICE_104');
  });

  it('an unknown id stays 404', async () => {
    expectError(await s.get(`/endpoints/${unknownId('ep')}`), 404, 'ERR_SERVICE_300');
  });
});
