// GET /openapi.json covers every route the server has, and nothing it does not.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalog } from '../../provider/catalog/index.js';
import { ERRORS } from '../../server/http/errors.js';
import '../../server/resources/register.js';
import { apiRoutes } from '../../server/resources/routes.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let doc: any;
beforeAll(async () => {
  s = await startTestServer();
  doc = (await s.get('/openapi.json', { token: null, version: null })).body;
});
afterAll(async () => { await s.close(); });

const routes = apiRoutes();
const SERVER_PATHS = ['/healthz', '/openapi.json'];

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 with the public base URL as its server', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: s.url }]);
    expect(doc.components.securitySchemes.bearer).toEqual({ type: 'http', scheme: 'bearer' });
  });

  it.each(routes.map((r) => [`${r.method} ${r.path}`, r] as const))('has %s', (_name, route) => {
    const op = doc.paths[route.path]?.[route.method.toLowerCase()];
    expect(op, `${route.method} ${route.path}`).toBeDefined();
    expect(op.responses[String(route.status)]).toBeDefined();
    expect(op.responses.default.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    const params = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    expect(op.parameters.filter((p: { in: string }) => p.in === 'path').map((p: { name: string }) => p.name)).toEqual(params);
    expect(op.parameters.filter((p: { in: string }) => p.in === 'query').map((p: { name: string }) => p.name)).toEqual([...route.query]);
    expect(op.parameters[0]).toEqual({ $ref: '#/components/parameters/ServiceVersion' });
    // A body is described where one is read, and where SPEC shows one the server ignores (agent commands).
    expect(Boolean(op.requestBody)).toBe(Boolean(route.request || route.ignoresBody));
  });

  it('has no operation the server lacks', () => {
    const known = new Set([...routes.map((r) => `${r.method} ${r.path}`), ...SERVER_PATHS.map((p) => `GET ${p}`)]);
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops as object)) expect(known, `${method} ${path}`).toContain(`${method.toUpperCase()} ${path}`);
    }
  });

  it('gives every operation a distinct operationId', () => {
    const ids = Object.values(doc.paths).flatMap((ops: any) => Object.values(ops).map((o: any) => o.operationId));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('has a schema for each kind with a read operation, and the error body with every registry code', () => {
    for (const kind of catalog.filter((k) => k.operations.includes('read'))) expect(doc.components.schemas[kind.kind], kind.kind).toBeDefined();
    expect(doc.components.schemas.Error.properties.error_code.enum).toEqual(Object.keys(ERRORS));
  });

  it('carries the catalog\'s limits and requirements', () => {
    const ruleCreate = doc.paths['/ip_policy_rules'].post.requestBody.content['application/json'].schema;
    expect([...ruleCreate.required].sort()).toEqual(['action', 'cidr', 'ip_policy_id']);
    expect(ruleCreate.additionalProperties).toBe(false);
    expect(ruleCreate.properties.description.maxLength).toBe(255);
    expect(ruleCreate.properties.metadata.maxLength).toBe(4096);
    const rulePatch = doc.paths['/ip_policy_rules/{id}'].patch.requestBody.content['application/json'].schema;
    expect(Object.keys(rulePatch.properties).sort()).toEqual(['cidr', 'description', 'metadata']);
    const subCreate = doc.paths['/event_subscriptions'].post.requestBody.content['application/json'].schema;
    expect(subCreate.properties.description.maxLength).toBe(255);
    const key = doc.components.schemas.APIKey;
    expect(Object.keys(key.properties).sort()).toEqual(['created_at', 'description', 'id', 'metadata', 'owner_id', 'token', 'uri']);
    const list = doc.paths['/api_keys'].get.responses['200'].content['application/json'].schema;
    expect(list.required).toEqual(['keys', 'uri', 'next_page_uri']);
  });
});
