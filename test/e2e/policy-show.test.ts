// `edgeform policy show`: a route as the policy the ingress runs for it. The one claim that
// matters is equivalence: the printed policy, given to `edgeform policy test`, decides each
// request as the ingress decides it for the route. One route with several modules (an IP
// restriction, a user-agent filter, a traffic policy, request and response headers), the same
// requests both ways; then the command's errors.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestDir, runCli } from '../helpers/cli.js';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const POLICY = `on_http_request:
  - name: blocked path
    expressions: ["req.url.path == '/app/blocked'"]
    actions: [{type: deny, config: {status_code: 403}}]
  - name: teapot
    expressions: ["getReqHeader('x-brew').exists(v, v == 'tea')"]
    actions: [{type: custom-response, config: {status_code: 418, body: "short and stout"}}]
  - name: tag
    actions: [{type: add-headers, config: {headers: {x-from-policy: "\${req.url.path}"}}}]
on_http_response:
  - name: stamp
    expressions: ["res.status_code == 200"]
    actions: [{type: add-headers, config: {headers: {x-checked: "yes"}}}]
`;

const MODULES = {
  ip_restriction: { ip_policy_ids: ['IPPolicy/office'] },
  user_agent_filter: { deny: ['(?i)bot'] },
  traffic_policy: { value: POLICY },
  request_headers: { add: { 'x-edge': 'shop' }, remove: ['x-debug'] },
  response_headers: { add: { 'x-resp': 'yes' }, remove: ['x-upstream-secret'] },
};

const indent = (text: string, by: string) => text.split('\n').map((l) => (l ? by + l : l)).join('\n');

const MANIFEST = `kind: IPPolicy
name: office
rules:
  - {cidr: 127.0.0.0/8, action: allow}
  - {cidr: 127.0.0.99/32, action: deny}
---
kind: HTTPSEdge
name: shop
hostports: [app.example.com:443]
routes:
  - match_type: path_prefix
    match: /app
    backend: {backend_id: HTTPResponseBackend/ok}
    ip_restriction: {ip_policy_ids: [IPPolicy/office]}
    user_agent_filter: {deny: ["(?i)bot"]}
    request_headers: {add: {x-edge: shop}, remove: [x-debug]}
    response_headers: {add: {x-resp: "yes"}, remove: [x-upstream-secret]}
    traffic_policy:
      value: |
${indent(POLICY, '        ')}`;

const TWO_ROUTES = `kind: HTTPSEdge
name: two
hostports: [two.example.com:443]
routes:
  - {match_type: path_prefix, match: /a, compression: {}}
  - {match_type: path_prefix, match: /b, websocket_tcp_converter: {}}
`;

const LONELY = `kind: TCPEdge
name: ssh
hostports: [tcp.example.com:22022]
ip_restriction: {ip_policy_ids: [IPPolicy/elsewhere]}
`;

const dir = manifestDir({ 'shop.yaml': MANIFEST, 'two.yaml': TWO_ROUTES });
const lonely = manifestDir({ 'ssh.yaml': LONELY });
let ing: HttpIngress;
let shown: string;

/** The requests both sides get: path, User-Agent, extra headers. */
const REQUESTS: { path: string; ua: string; headers?: Record<string, string> }[] = [
  { path: '/app/', ua: 'Mozilla/5.0' },
  { path: '/app/', ua: 'Googlebot/2.1' },
  { path: '/app/blocked', ua: 'Mozilla/5.0' },
  { path: '/app/kettle', ua: 'curl/8', headers: { 'x-brew': 'tea' } },
  { path: '/app/kettle', ua: 'curl/8', headers: { 'x-brew': 'coffee' } },
];

beforeAll(async () => {
  ing = await startHttpIngress(
    tableOf({
      edges: [{ id: 'edghts_shop', hostports: ['app.example.com:443'], routes: [route('edghtsrt_app', '/app', { backend: { enabled: true, backend_id: 'bkdhr_ok' }, ...Object.fromEntries(Object.entries(MODULES).map(([k, v]) => [k, { enabled: true, ...v }])) })] }],
      backends: [{ id: 'bkdhr_ok', kind: 'HTTPResponseBackend', status_code: 200, body: 'from upstream', headers: { 'x-upstream-secret': 's3' } }],
      ipPolicies: { 'IPPolicy/office': [{ cidr: '127.0.0.0/8', action: 'allow' }, { cidr: '127.0.0.99/32', action: 'deny' }] },
    }),
  );
  const r = await runCli(['policy', 'show', path.join(dir, 'shop.yaml')]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  shown = path.join(dir, 'shown.yaml');
  fs.writeFileSync(shown, r.stdout);
});

afterAll(async () => {
  await ing?.close();
  await api?.close();
});

let api: TestServer | undefined;

describe('edgeform policy show', () => {
  it('prints the modules as module-* actions in the documented order, the policy rules at traffic_policy\'s place', () => {
    const text = fs.readFileSync(shown, 'utf8');
    const types = [...text.matchAll(/type: (\S+)/g)].map((m) => m[1]);
    expect(types).toEqual(['module-ip-restriction', 'module-user-agent-filter', 'deny', 'custom-response', 'add-headers', 'module-request-headers', 'module-response-headers', 'add-headers']);
    // The policy's rules as they are now, beside the id the ingress reads live.
    expect(text).toContain('id: IPPolicy/office');
    expect(text).toContain('cidr: 127.0.0.99/32');
  });

  it('policy test on the output decides each request as the ingress does for the route', async () => {
    for (const q of REQUESTS) {
      const live = await ing.get(q.path, { headers: { 'user-agent': q.ua, ...q.headers } });
      const args = ['policy', 'test', shown, '--json', '--request', `GET https://app.example.com${q.path}`, '-H', `User-Agent: ${q.ua}`, '--client-ip', '127.0.0.1', '--upstream-body', 'from upstream', '--upstream-header', 'x-upstream-secret: s3'];
      for (const [k, v] of Object.entries(q.headers ?? {})) args.push('-H', `${k}: ${v}`);
      const offline = await runCli(args);
      expect(offline.code, offline.stderr).toBe(0);
      const run = offline.json().requests[0];
      const answer = run.response ?? run.client_response;
      const said = `${q.path} as ${q.ua}`;
      expect(answer.status, said).toBe(live.status);
      expect(answer.headers['edgeform-error-code'], said).toBe(live.headers['edgeform-error-code']);
      expect(answer.headers['x-resp'], said).toBe(live.headers['x-resp']);
      expect(answer.headers['x-checked'], said).toBe(live.headers['x-checked']);
      expect(answer.headers['x-upstream-secret'], said).toBe(live.headers['x-upstream-secret']);
      if (answer.status === 418) expect(live.text).toBe(answer.body);
    }
  });

  it('--json prints the route and its policy; a manifest with several routes needs --route', async () => {
    const many = await runCli(['policy', 'show', path.join(dir, 'two.yaml')]);
    expect(many.code).toBe(2);
    expect(many.stderr).toContain('choose one with --route, one of: "HTTPSEdge/two /a", "HTTPSEdge/two /b"');
    const one = await runCli(['policy', 'show', path.join(dir, 'two.yaml'), '--route', '/b', '--json']);
    expect(one.code).toBe(0);
    expect(one.json()).toEqual({ route: 'HTTPSEdge/two /b', policy: { on_http_request: [{ name: 'websocket_tcp_converter module', expressions: [], actions: [{ type: 'module-websocket-tcp-converter', config: {} }] }] } });
  });

  it('says what to give when the argument is neither a file nor an id, and when no API key is set', async () => {
    const missing = await runCli(['policy', 'show', path.join(dir, 'nope.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file; give a manifest file (or folder), a route id (edghtsrt_...)');
    // An IP policy the file does not hold: printed without rules, and said so.
    const partial = await runCli(['policy', 'show', path.join(lonely, 'ssh.yaml')]);
    expect(partial.code).toBe(0);
    expect(partial.stderr).toContain('IPPolicy/elsewhere is not in');
    expect(partial.stdout).toContain('type: module-ip-restriction');
    const noKey = await runCli(['policy', 'show', 'edghtsrt_abc123'], { EDGEFORM_API_KEY: undefined });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('no API key: set EDGEFORM_API_KEY (or --api-key)');
  });

  it('reads a route from the API, with its IP policies\' rules as they are now, by its id or EDGE_ID/ROUTE_ID', async () => {
    api = await startTestServer();
    const policy = (await api.post('/ip_policies', { description: 'office' })).body;
    expect((await api.post('/ip_policy_rules', { ip_policy_id: policy.id, cidr: '198.51.100.0/24', action: 'allow' })).status).toBe(201);
    const edge = (await api.post('/edges/https', { hostports: ['show.example.com:443'] })).body;
    const made = await api.post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/', ip_restriction: { ip_policy_ids: [policy.id] }, user_agent_filter: { deny: ['(?i)bot'] }, traffic_policy: { value: POLICY } });
    expect(made.status, made.text).toBe(201);
    const env = { EDGEFORM_API_URL: api.url, EDGEFORM_API_KEY: api.token };
    const byId = await runCli(['policy', 'show', made.body.id, '--json'], env);
    expect(byId.code, byId.stderr).toBe(0);
    const { policy: shownPolicy } = byId.json();
    expect(shownPolicy.on_http_request[0]).toEqual({ name: 'ip_restriction module', expressions: [], actions: [{ type: 'module-ip-restriction', config: { ip_policies: [{ id: policy.id, rules: [{ cidr: '198.51.100.0/24', action: 'allow' }] }] } }] });
    expect(shownPolicy.on_http_request.map((r: { actions: { type: string }[] }) => r.actions[0].type)).toEqual(['module-ip-restriction', 'module-user-agent-filter', 'deny', 'custom-response', 'add-headers']);
    const byPath = await runCli(['policy', 'show', `${edge.id}/${made.body.id}`, '--json'], env);
    expect(byPath.json().policy).toEqual(shownPolicy);
    // Given to policy test, the printed policy refuses an address outside the office and lets one inside through.
    const file = path.join(dir, 'from-api.yaml');
    fs.writeFileSync(file, (await runCli(['policy', 'show', made.body.id], env)).stdout);
    const outside = await runCli(['policy', 'test', file, '--json', '--request', 'GET https://show.example.com/', '--client-ip', '203.0.113.9']);
    expect(outside.json().requests[0].response.headers['edgeform-error-code']).toBe('ERR_SERVICE_780');
    const inside = await runCli(['policy', 'test', file, '--json', '--request', 'GET https://show.example.com/', '--client-ip', '198.51.100.7']);
    expect(inside.json().requests[0].result).toBe('forwarded');
    const unknown = await runCli(['policy', 'show', 'edghtsrt_nosuchroute1'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no HTTPS edge of');
  });
});
