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

const dir = manifestDir({ 'shop.yaml': MANIFEST, 'two.yaml': TWO_ROUTES });
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
});

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
    expect(missing.stderr).toContain('no such file; give a manifest file, a route id (edghtsrt_...)');
    const noKey = await runCli(['policy', 'show', 'edghtsrt_abc123'], { EDGEFORM_API_KEY: undefined });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('no API key: set EDGEFORM_API_KEY (or --api-key)');
  });
});
