// Every list and map a body holds has an item limit, declared once in the catalog: at the
// limit is accepted, one more is a 400 naming the field, and the same limit is in the
// OpenAPI document (maxItems / maxProperties), in `edgeform validate` and in the Terraform
// provider's validation. Before, 30,000 headers fitted in one backend.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ITEM_LIMITS } from '../../provider/catalog/fields.js';
import { resourceType } from '../../provider/terraform/schema.js';
import { validateConfig } from '../../provider/terraform/resource.js';
import { expectInvalid } from '../helpers/api.js';
import { manifestDir, runCli } from '../helpers/cli.js';
import { freshHostport } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;
const entries = (n: number, value = 'v') => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, value]));
const list = (n: number, f: (i: number) => string = (i) => `item${i}`) => Array.from({ length: n }, (_, i) => f(i));

let s: TestServer;
let edgeId: string;
let routePath: string;
let n = 0;
beforeAll(async () => {
  s = await startTestServer();
  edgeId = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id;
  routePath = `/edges/https/${edgeId}/routes/${(await s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: '/limits' })).body.id}`;
});
afterAll(async () => { await s.close(); });

const route = (extra: Doc) => s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: `/l${++n}`, ...extra });
const ids = async (path: string, body: Doc, count: number) => {
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push((await s.post(path, body)).body.id);
  return out;
};

/** Each case: the limit, how to send `count` items, and the field a 400 names. */
const CASES: Array<{ field: string; limit: number; send: (count: number) => Promise<any>; reason: string }> = [
  { reason: 'labels of a tunnel-group backend', field: 'labels', limit: ITEM_LIMITS.labels, send: (c) => s.post('/backends/tunnel_group', { labels: entries(c) }) },
  { reason: 'headers of a fixed response', field: 'headers', limit: ITEM_LIMITS.headers, send: (c) => s.post('/backends/http_response', { body: 'x', headers: entries(c) }) },
  { reason: 'request headers added on route create', field: 'request_headers.add', limit: ITEM_LIMITS.headers, send: (c) => route({ request_headers: { add: entries(c) } }) },
  { reason: 'request headers removed on route create', field: 'request_headers.remove', limit: ITEM_LIMITS.headers, send: (c) => route({ request_headers: { remove: list(c, (i) => `x-h${i}`) } }) },
  { reason: 'response headers added by module PUT', field: 'add', limit: ITEM_LIMITS.headers, send: (c) => s.put(`${routePath}/response_headers`, { add: entries(c) }) },
  { reason: 'response headers removed by module PUT', field: 'remove', limit: ITEM_LIMITS.headers, send: (c) => s.put(`${routePath}/response_headers`, { remove: list(c, (i) => `x-h${i}`) }) },
  { reason: 'user-agent patterns', field: 'user_agent_filter.deny', limit: ITEM_LIMITS.strings, send: (c) => route({ user_agent_filter: { deny: list(c, (i) => `bot${i}`) } }) },
  { reason: 'OIDC scopes', field: 'oidc.scopes', limit: ITEM_LIMITS.strings, send: (c) => route({ oidc: { issuer: 'https://id.example.com', client_id: 'a', client_secret: 'b', scopes: list(c) } }) },
  { reason: 'IP policies of a route', field: 'ip_restriction.ip_policy_ids', limit: ITEM_LIMITS.ids, send: async (c) => route({ ip_restriction: { ip_policy_ids: await ids('/ip_policies', {}, c) } }) },
  { reason: 'children of a weighted backend', field: 'backends', limit: ITEM_LIMITS.weights, send: async (c) => s.post('/backends/weighted', { backends: Object.fromEntries((await ids('/backends/http_response', { body: 'x' }, c)).map((id) => [id, 1])) }) },
  { reason: 'SSH certificate extensions', field: 'extensions', limit: ITEM_LIMITS.sshOptions, send: async (c) => {
    const ca = await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' });
    return s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.body.id, public_key: ca.body.public_key, extensions: entries(c, '') });
  } },
];

describe('item limits on the API', () => {
  it.each(CASES)('$reason: $limit accepted, one more is 400 naming $field', async ({ field, limit, send }) => {
    const at = await send(limit);
    expect(at.status, at.text).toBeLessThan(300);
    const over = expectInvalid(await send(limit + 1), field);
    expect(over.details.reason).toBe(`at most ${limit} entries`);
  }, 60_000);

  it('30,000 headers (what fitted in 1 MiB before) are refused', async () => {
    expectInvalid(await s.post('/backends/http_response', { body: 'x', headers: entries(30_000) }), 'headers');
  });

  it.each([
    { reason: 'a header value over 8192 bytes', send: () => s.post('/backends/http_response', { body: 'x', headers: { 'x-a': 'v'.repeat(8193) } }), field: 'headers.x-a' },
    { reason: 'header names and values over 16 KiB in all', send: () => s.post('/backends/http_response', { body: 'x', headers: entries(3, 'v'.repeat(6000)) }), field: 'headers' },
    { reason: 'a label value over 255 bytes', send: () => s.post('/backends/tunnel_group', { labels: { app: 'v'.repeat(256) } }), field: 'labels.app' },
  ])('$reason: 400 naming $field', async ({ send, field }) => {
    expectInvalid(await send(), field);
  });
});

describe('the OpenAPI document carries every limit', () => {
  it('every list and map in every request body has maxItems or maxProperties', async () => {
    const doc = (await s.get('/openapi.json')).body;
    const unbounded: string[] = [];
    const limits = new Map<string, number>();
    const walk = (schema: any, at: string) => {
      if (!schema || typeof schema !== 'object') return;
      if (Array.isArray(schema)) return schema.forEach((x, i) => walk(x, `${at}/${i}`));
      const isMap = schema.type === 'object' && schema.additionalProperties && typeof schema.additionalProperties === 'object';
      if (schema.type === 'array' || isMap) {
        const limit = schema.maxItems ?? schema.maxProperties;
        if (limit === undefined) unbounded.push(at);
        else limits.set(at, limit);
      }
      for (const [k, v] of Object.entries(schema)) walk(v, `${at}/${k}`);
    };
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) walk(op.requestBody?.content?.['application/json']?.schema, `${method} ${path}`);
    }
    expect(unbounded).toEqual([]);
    const limitOf = (suffix: string) => [...limits].find(([k]) => k.replace(/\/anyOf\/\d+/g, '').endsWith(suffix))?.[1];
    expect(limitOf('post /backends/http_response/properties/headers')).toBe(ITEM_LIMITS.headers);
    expect(limitOf('post /backends/tunnel_group/properties/labels')).toBe(ITEM_LIMITS.labels);
    expect(limitOf('put /edges/https/{edge_id}/routes/{id}/request_headers/properties/remove')).toBe(ITEM_LIMITS.headers);
    expect(limitOf('put /edges/https/{edge_id}/routes/{id}/request_headers/properties/add')).toBe(ITEM_LIMITS.headers);
  });
});

describe('edgeform validate and Terraform know the same limits', () => {
  it('edgeform validate reports a map over its limit on the field, exit 1', async () => {
    const labels = Object.keys(entries(ITEM_LIMITS.labels + 1)).map((k) => `  ${k}: v`).join('\n');
    const r = await runCli(['validate', '-f', manifestDir({ 'stack.yaml': `kind: TunnelGroupBackend\nname: t\nlabels:\n${labels}\n` })]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`labels: at most ${ITEM_LIMITS.labels} entries`));
    const ok = await runCli(['validate', '-f', manifestDir({ 'stack.yaml': `kind: TunnelGroupBackend\nname: t\nlabels:\n${labels.split('\n').slice(1).join('\n')}\n` })]);
    expect(ok.code, ok.stderr).toBe(0);
  });

  it("the Terraform provider's validation refuses a list over its limit and accepts one at it", () => {
    const rt = resourceType('edgeform_http_response_backend')!;
    const over = validateConfig(rt, { body: 'x', status_code: 200, headers: entries(ITEM_LIMITS.headers + 1) });
    expect(over.map((d) => JSON.stringify(d)).join('\n')).toMatch(new RegExp(`at most ${ITEM_LIMITS.headers} entries`));
    expect(validateConfig(rt, { body: 'x', status_code: 200, headers: entries(ITEM_LIMITS.headers) })).toEqual([]);
  });
});
