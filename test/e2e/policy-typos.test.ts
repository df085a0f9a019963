// Issue 13.6: a policy with typos (an action type rate-limt, capacity 0, an expression
// naming a variable that does not exist) is refused everywhere a policy is checked: the
// API (400 naming the field and each problem), `edgeform validate` and `plan` (file:line),
// and `terraform validate`, with the same words.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectInvalid } from '../helpers/api.js';
import { manifestDir, runCli } from '../helpers/cli.js';
import { freshHostport } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { hasTerraform, workspace } from '../helpers/terraform.js';
import { TYPO_POLICY } from '../helpers/policies.js';

const EXPRESSION = /on_http_request\[0\] \(limit\) expressions\[0\] column 5: unknown variable req\.pth/;
const TYPE = 'unknown action type "rate-limt" (did you mean rate-limit?); supported types: rate-limit, deny, custom-response, add-headers, remove-headers, redirect, url-rewrite, restrict-ips, forward-internal';
const CAPACITY = 'capacity 0 is out of range 1..2,000,000,000';

const indent = (text: string, spaces: number) => text.trimEnd().split('\n').map((l) => `${' '.repeat(spaces)}${l}`).join('\n');
const MANIFEST = `kind: HTTPSEdge
name: web
routes:
  - match_type: path_prefix
    match: /api
    traffic_policy:
      value: |
${indent(TYPO_POLICY, 8)}
`;

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

describe('a policy with typos', () => {
  it('is a 400 from the API naming the field and every problem', async () => {
    const edge = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id;
    const r = await s.post(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match: '/api', traffic_policy: { value: TYPO_POLICY } });
    const body = expectInvalid(r, 'traffic_policy.value');
    expect(body.details.reason).toMatch(EXPRESSION);
    expect(body.details.policy_path).toBe('on_http_request[0].expressions[0]');
    const problems = body.details.problems as { field: string; reason: string }[];
    const reasons = problems.map((p) => p.reason);
    expect(reasons).toEqual([
      expect.stringMatching(EXPRESSION),
      `on_http_request[0].actions[0].type: ${TYPE}`,
      `on_http_request[1].actions[0].config.capacity: ${CAPACITY}`,
    ]);
    expect(problems.every((p) => p.field === 'traffic_policy.value')).toBe(true);
  });

  it('is refused by edgeform validate with file:line problems', async () => {
    const dir = manifestDir({ 'edge.yaml': MANIFEST });
    const r = await runCli(['validate', '-f', dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/edge\.yaml:7: routes\[0\]\.traffic_policy\.value\.on_http_request\[0\]\.expressions\[0\]: on_http_request\[0\] \(limit\) expressions\[0\] column 5: unknown variable req\.pth/);
    expect(r.stderr).toContain(`routes[0].traffic_policy.value.on_http_request[0].actions[0].type: ${TYPE}`);
    expect(r.stderr).toContain(`routes[0].traffic_policy.value.on_http_request[1].actions[0].config.capacity: ${CAPACITY}`);
    expect(r.stderr).toContain('3 problems found.');
  });

  it('stops edgeform plan before it reads anything from the server', async () => {
    const dir = manifestDir({ 'edge.yaml': MANIFEST });
    const before = s.logs.length;
    const r = await runCli(['plan', '-f', dir, '--api-url', s.url, '--stack', 'typos'], { EDGEFORM_API_KEY: s.token });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(TYPE);
    expect(r.stderr).toContain(CAPACITY);
    expect(r.stderr).toMatch(EXPRESSION);
    expect(s.logs.length).toBe(before);
  });

  it.skipIf(!hasTerraform)('is refused by terraform validate with the same words', async () => {
    const tf = await workspace(s);
    tf.write(`resource "edgeform_https_edge" "web" {}
resource "edgeform_https_edge_route" "api" {
  edge_id    = edgeform_https_edge.web.id
  match_type = "path_prefix"
  match      = "/api"
  traffic_policy {
    value = ${JSON.stringify(TYPO_POLICY)}
  }
}
`);
    const r = await tf.run('validate');
    expect(r.code).toBe(1);
    // Terraform wraps long details; the words are the same once the lines are joined.
    const text = r.stderr.replace(/\s+/g, ' ');
    expect(text).toContain(`traffic_policy.value.on_http_request[0].actions[0].type: ${TYPE}`);
    expect(text).toContain(`traffic_policy.value.on_http_request[1].actions[0].config.capacity: ${CAPACITY}`);
    expect(text).toMatch(EXPRESSION);
  }, 120_000);
});
