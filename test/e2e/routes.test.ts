// HTTPS edge routes and their thirteen modules, end to end: CRUD and order inside the edge,
// `match` uniqueness, every module inline and through its own PUT/GET/DELETE (walked from
// the catalog), PATCH semantics, atomic writes, write-only secrets, SAML's computed
// service-provider identity, and an edge of 20 routes each carrying every module.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kindOf } from '../../provider/catalog/index.js';
import { expectError, expectInvalid, ID, RFC3339, unknownId } from '../helpers/api.js';
import { createRefs, freshHostport, IDP_METADATA, moduleSamples, type ModuleSamples, type Refs } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const routeKind = kindOf('HTTPSEdgeRoute');
const MODULES = Object.keys(routeKind.modules);
const AUTH = ['oauth', 'oidc', 'saml'];

let s: TestServer;
let refs: Refs;
let samples: Record<string, ModuleSamples>;
beforeAll(async () => {
  s = await startTestServer();
  refs = await createRefs(s);
  samples = moduleSamples(routeKind, refs, s.url);
});
afterAll(async () => { await s.close(); });

type Doc = Record<string, any>;
const newEdge = async (body: Doc = {}) => {
  const r = await s.post('/edges/https', { hostports: [freshHostport()], ...body });
  expect(r.status, r.text).toBe(201);
  return r.body as Doc;
};
const routes = (edgeId: string) => `/edges/https/${edgeId}/routes`;
const newRoute = async (edgeId: string, body: Doc) => {
  const r = await s.post(routes(edgeId), { match_type: 'path_prefix', match: `/${crypto.randomUUID()}`, ...body });
  expect(r.status, r.text).toBe(201);
  return r.body as Doc;
};
const noModules = Object.fromEntries(MODULES.map((m) => [m, null]));

/** Every module set (full samples), with the auth module `auth` as the only one of the three. */
const everyModule = (auth: string, form: 'input' | 'read') =>
  Object.fromEntries(MODULES.filter((m) => !AUTH.includes(m) || m === auth).map((m) => [m, samples[m].full[form]]));
const withEveryModule = (auth: string) => ({ ...noModules, ...everyModule(auth, 'read') });

describe('routes', () => {
  it('create, get, PATCH and delete; routes appear inside their edge, oldest first', async () => {
    const edge = await newEdge();
    const created = await s.post(routes(edge.id), { match_type: 'exact_path', match: '/health', description: 'probe', metadata: '{"team":"sre"}' });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(id).toMatch(ID);
    expect(id.startsWith('edghtsrt_')).toBe(true);
    expect(created.body).toEqual({
      id,
      uri: `${edge.uri}/routes/${id}`,
      created_at: expect.stringMatching(RFC3339),
      edge_id: edge.id,
      match_type: 'exact_path',
      match: '/health',
      // SPEC: the sample route carries a policy member set to null.
      policy: null,
      description: 'probe',
      metadata: '{"team":"sre"}',
      ...noModules,
    });
    expect((await s.get(`${routes(edge.id)}/${id}`)).body).toEqual(created.body);
    const second = await newRoute(edge.id, { match: '/api' });
    const third = await newRoute(edge.id, { match: 'example.com/static' });
    const got = await s.get(`/edges/https/${edge.id}`);
    expect(got.body.routes.map((r: Doc) => r.id)).toEqual([id, second.id, third.id]);
    expect(got.body.routes[0]).toEqual(created.body);
    const listed = (await s.get('/edges/https')).body.https_edges.find((e: Doc) => e.id === edge.id);
    expect(listed.routes.map((r: Doc) => r.id)).toEqual([id, second.id, third.id]);

    const patched = await s.patch(`${routes(edge.id)}/${id}`, { match_type: 'path_prefix', match: '/healthz', description: '', metadata: 'm' });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created.body, match_type: 'path_prefix', match: '/healthz', description: '', metadata: 'm' });

    expect((await s.del(`${routes(edge.id)}/${second.id}`)).status).toBe(204);
    expectError(await s.get(`${routes(edge.id)}/${second.id}`), 404, 'ERR_SERVICE_300');
    expectError(await s.del(`${routes(edge.id)}/${second.id}`), 404, 'ERR_SERVICE_300');
    expectError(await s.patch(`${routes(edge.id)}/${second.id}`, {}), 404, 'ERR_SERVICE_300');
    expect((await s.get(`/edges/https/${edge.id}`)).body.routes.map((r: Doc) => r.id)).toEqual([id, third.id]);
  });

  it('a route is reached only through its own edge; an unknown edge is 404', async () => {
    const [a, b] = [await newEdge(), await newEdge()];
    const route = await newRoute(a.id, {});
    expectError(await s.get(`${routes(b.id)}/${route.id}`), 404, 'ERR_SERVICE_300');
    expectError(await s.patch(`${routes(b.id)}/${route.id}`, { description: 'x' }), 404);
    expectError(await s.del(`${routes(b.id)}/${route.id}`), 404);
    expectError(await s.put(`${routes(b.id)}/${route.id}/compression`, {}), 404);
    expectError(await s.post(routes(unknownId('edghts')), { match_type: 'exact_path', match: '/' }), 404, 'ERR_SERVICE_300');
    expect((await s.get(`${routes(a.id)}/${route.id}`)).status).toBe(200);
  });

  it('match is unique within its edge (409 naming the holder), free in other edges, and freed by PATCH and delete', async () => {
    const [a, b] = [await newEdge(), await newEdge()];
    const first = await newRoute(a.id, { match: '/dup' });
    const dup = await s.post(routes(a.id), { match_type: 'exact_path', match: '/dup' });
    const body = expectError(dup, 409, 'ERR_SERVICE_320');
    expect(body.details.conflicting_id).toBe(first.id);
    expect(body.details.field).toBe('match');
    expect((await s.post(routes(b.id), { match_type: 'exact_path', match: '/dup' })).status).toBe(201);
    const other = await newRoute(a.id, { match: '/other' });
    expectError(await s.patch(`${routes(a.id)}/${other.id}`, { match: '/dup' }), 409, 'ERR_SERVICE_320');
    expect((await s.patch(`${routes(a.id)}/${first.id}`, { match: '/moved' })).status).toBe(200);
    expect((await s.patch(`${routes(a.id)}/${other.id}`, { match: '/dup' })).status).toBe(200);
    expect((await s.del(`${routes(a.id)}/${other.id}`)).status).toBe(204);
    expect((await s.post(routes(a.id), { match_type: 'path_prefix', match: '/dup' })).status).toBe(201);
  });

  it.each([
    { reason: 'match_type outside exact_path/path_prefix', body: { match_type: 'regex', match: '/' }, field: 'match_type' },
    { reason: 'match_type missing', body: { match: '/' }, field: 'match_type' },
    { reason: 'match missing', body: { match_type: 'exact_path' }, field: 'match' },
    { reason: 'match empty', body: { match_type: 'exact_path', match: '' }, field: 'match' },
    { reason: 'match with whitespace', body: { match_type: 'exact_path', match: '/a b' }, field: 'match' },
    { reason: 'match with a control character', body: { match_type: 'exact_path', match: '/a\u0001' }, field: 'match' },
    { reason: 'match longer than 1024 characters', body: { match_type: 'exact_path', match: `/${'a'.repeat(1024)}` }, field: 'match' },
    { reason: 'description over 255 bytes', body: { match_type: 'exact_path', match: '/', description: 'd'.repeat(256) }, field: 'description' },
    { reason: 'metadata over 4096 bytes', body: { match_type: 'exact_path', match: '/', metadata: 'm'.repeat(4097) }, field: 'metadata' },
    { reason: 'an edge_id that differs from the path', body: { match_type: 'exact_path', match: '/', edge_id: unknownId('edghts') }, field: 'edge_id', code: 'ERR_SERVICE_108' as const },
  ])('400 for $reason', async ({ body, field, code }) => {
    const edge = await newEdge();
    expectInvalid(await s.post(routes(edge.id), body), field, code);
    expect((await s.get(`/edges/https/${edge.id}`)).body.routes).toEqual([]);
  });

  it('a body may repeat the path ids', async () => {
    const edge = await newEdge();
    const r = await s.post(routes(edge.id), { edge_id: edge.id, match_type: 'exact_path', match: '/' });
    expect(r.status).toBe(201);
    expect((await s.patch(`${routes(edge.id)}/${r.body.id}`, { id: r.body.id, edge_id: edge.id, description: 'same' })).body.description).toBe('same');
    expectInvalid(await s.patch(`${routes(edge.id)}/${r.body.id}`, { id: unknownId('edghtsrt') }), 'id', 'ERR_SERVICE_108');
  });

  it('deleting an edge deletes its routes and releases what they referenced and reserved', async () => {
    const edge = await newEdge();
    const backend = (await s.post('/backends/http_response', { body: 'x' })).body;
    const route = await newRoute(edge.id, { match: '/owned', backend: { backend_id: backend.id } });
    const blocked = expectError(await s.del(`/backends/http_response/${backend.id}`), 409, 'ERR_SERVICE_321');
    expect(blocked.details.referrers).toEqual([route.id]);
    expect((await s.del(`/edges/https/${edge.id}`)).status).toBe(204);
    expectError(await s.get(`${routes(edge.id)}/${route.id}`), 404);
    expectError(await s.get(`/edges/https/${edge.id}`), 404);
    expect((await s.del(`/backends/http_response/${backend.id}`)).status).toBe(204);
  });
});

describe('route modules', () => {
  it('every module of the catalog has samples here, and the catalog has all thirteen', () => {
    expect(MODULES).toEqual([
      'backend', 'ip_restriction', 'circuit_breaker', 'compression', 'request_headers', 'response_headers', 'webhook_verification',
      'oauth', 'saml', 'oidc', 'websocket_tcp_converter', 'user_agent_filter', 'traffic_policy',
    ]);
    expect(Object.keys(samples).sort()).toEqual([...MODULES].sort());
  });

  describe.each(MODULES)('%s', (name) => {
    const at = (edgeId: string, routeId: string) => `${routes(edgeId)}/${routeId}/${name}`;

    it('inline on create: read back exactly as written, in the creation response, GET and the edge', async () => {
      const edge = await newEdge();
      const created = await newRoute(edge.id, { [name]: samples[name].full.input });
      expect(created).toEqual({ ...created, ...noModules, [name]: samples[name].full.read });
      expect((await s.get(`${routes(edge.id)}/${created.id}`)).body).toEqual(created);
      expect((await s.get(`/edges/https/${edge.id}`)).body.routes).toEqual([created]);
      const minimal = await newRoute(edge.id, { [name]: samples[name].minimal.input });
      expect(minimal[name]).toEqual(samples[name].minimal.read);
    });

    it('PUT, GET, PUT again (replaces the whole module), PUT wrapped in {module}, DELETE', async () => {
      const edge = await newEdge();
      const route = await newRoute(edge.id, {});
      expectError(await s.get(at(edge.id, route.id)), 404, 'ERR_SERVICE_302');
      expectError(await s.del(at(edge.id, route.id)), 404, 'ERR_SERVICE_302');

      const put = await s.put(at(edge.id, route.id), samples[name].full.input);
      expect(put.status, put.text).toBe(200);
      expect(put.body).toEqual(samples[name].full.read);
      expect((await s.get(at(edge.id, route.id))).body).toEqual(put.body);
      expect((await s.get(`${routes(edge.id)}/${route.id}`)).body).toEqual({ ...route, [name]: put.body });

      const replaced = await s.put(at(edge.id, route.id), samples[name].minimal.input);
      expect(replaced.status, replaced.text).toBe(200);
      expect(replaced.body).toEqual(samples[name].minimal.read);
      expect((await s.get(at(edge.id, route.id))).body).toEqual(replaced.body);

      const wrapped = await s.put(at(edge.id, route.id), { module: samples[name].full.input, id: route.id, edge_id: edge.id });
      expect(wrapped.status, wrapped.text).toBe(200);
      expect(wrapped.body).toEqual(samples[name].full.read);
      const bare = await s.put(at(edge.id, route.id), { ...samples[name].minimal.input, id: route.id, edge_id: edge.id });
      expect(bare.body).toEqual(samples[name].minimal.read);
      expectInvalid(await s.put(at(edge.id, route.id), { module: samples[name].full.input, id: unknownId('edghtsrt') }), 'id', 'ERR_SERVICE_108');

      expect((await s.del(at(edge.id, route.id))).status).toBe(204);
      expectError(await s.get(at(edge.id, route.id)), 404, 'ERR_SERVICE_302');
      expect((await s.get(`${routes(edge.id)}/${route.id}`)).body).toEqual(route);
    });

    it('PATCH: a given module replaces the old one whole, null and absence leave it unchanged', async () => {
      const edge = await newEdge();
      const route = await newRoute(edge.id, { [name]: samples[name].full.input });
      const replaced = await s.patch(`${routes(edge.id)}/${route.id}`, { [name]: samples[name].minimal.input });
      expect(replaced.status, replaced.text).toBe(200);
      expect(replaced.body[name]).toEqual(samples[name].minimal.read);
      const withNull = await s.patch(`${routes(edge.id)}/${route.id}`, { [name]: null, description: 'kept' });
      expect(withNull.body).toEqual({ ...replaced.body, description: 'kept' });
      const absent = await s.patch(`${routes(edge.id)}/${route.id}`, { metadata: 'also kept' });
      expect(absent.body).toEqual({ ...withNull.body, metadata: 'also kept' });
    });
  });
});

describe('PATCH of a route with every module', () => {
  it.each(AUTH)('leaves every module untouched when they are absent (auth module %s), and write-only values survive', async (auth) => {
    const edge = await newEdge();
    const route = await newRoute(edge.id, everyModule(auth, 'input'));
    expect(route).toEqual({ ...route, ...withEveryModule(auth) });
    const patched = await s.patch(`${routes(edge.id)}/${route.id}`, { description: 'only this', match: '/changed' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toEqual({ ...route, description: 'only this', match: '/changed' });
    // The module kept its write-only secrets: replacing a sibling re-validates the whole route.
    const again = await s.put(`${routes(edge.id)}/${route.id}/compression`, { enabled: true });
    expect(again.status, again.text).toBe(200);
  });
});

describe('an edge with 20 routes, each carrying every module', () => {
  it('reads every route back exactly as written, in creation order', async () => {
    const edge = await newEdge();
    const expected: Doc[] = [];
    for (let i = 0; i < 20; i++) {
      const auth = AUTH[i % AUTH.length];
      const r = await s.post(routes(edge.id), { match_type: i % 2 ? 'exact_path' : 'path_prefix', match: `/r${i}`, description: `route ${i}`, ...everyModule(auth, 'input') });
      expect(r.status, r.text).toBe(201);
      const want = { id: r.body.id, uri: `${edge.uri}/routes/${r.body.id}`, created_at: expect.stringMatching(RFC3339), edge_id: edge.id, match_type: i % 2 ? 'exact_path' : 'path_prefix', match: `/r${i}`, description: `route ${i}`, metadata: '', policy: null, ...withEveryModule(auth) };
      expect(r.body).toEqual(want);
      expected.push(want);
    }
    const got = await s.get(`/edges/https/${edge.id}`);
    expect(got.body.routes).toHaveLength(20);
    expect(got.body.routes).toEqual(expected);
    for (const want of expected.slice(0, 3)) expect((await s.get(`${routes(edge.id)}/${want.id}`)).body).toEqual(want);
    const listed = (await s.get('/edges/https')).body.https_edges.find((e: Doc) => e.id === edge.id);
    expect(listed).toEqual(got.body);
  });
});

describe('atomic writes: a failing create or PATCH stores nothing', () => {
  it.each([
    { reason: 'an IP policy that does not exist', bad: { ip_restriction: { ip_policy_ids: [unknownId('ipp')] } }, status: 400, field: 'ip_restriction.ip_policy_ids' },
    { reason: 'a backend that does not exist', bad: { backend: { backend_id: unknownId('bkdhr') } }, status: 400, field: 'backend.backend_id' },
    { reason: 'an invalid module among valid ones', bad: { circuit_breaker: { num_buckets: 129 } }, status: 400, field: 'circuit_breaker.num_buckets' },
    { reason: 'two authentication modules', bad: { oidc: oidcInput() }, status: 400, field: 'saml' },
    { reason: 'a match the edge already has', bad: { match: '/taken' }, status: 409, field: 'match' },
  ])('create with $reason', async ({ bad, status, field }) => {
    const edge = await newEdge();
    const taken = await newRoute(edge.id, { match: '/taken' });
    const backend = (await s.post('/backends/http_response', {})).body;
    const body = { match_type: 'path_prefix', match: '/new', ...everyModule('saml', 'input'), backend: { backend_id: backend.id }, ...bad };
    const r = await s.post(routes(edge.id), body);
    const err = expectError(r, status);
    expect(err.details.field).toBe(field);
    expect((await s.get(`/edges/https/${edge.id}`)).body.routes).toEqual([taken]);
    // Nothing left behind: the backend has no referrer and the match is free.
    expect((await s.del(`/backends/http_response/${backend.id}`)).status).toBe(204);
    expect((await s.post(routes(edge.id), { match_type: 'exact_path', match: '/new' })).status).toBe(201);
  });

  it.each([
    { reason: 'a backend that does not exist', bad: { backend: { backend_id: unknownId('bkdwd') } }, status: 400 },
    { reason: 'a second authentication module', bad: { oauth: { provider: { github: {} } } }, status: 400 },
    { reason: 'an invalid traffic policy', bad: { traffic_policy: { value: 'on_http_request: 3' } }, status: 400 },
    { reason: 'a match another route has', bad: { match: '/taken' }, status: 409 },
  ])('PATCH with valid changes and $reason', async ({ bad, status }) => {
    const edge = await newEdge();
    await newRoute(edge.id, { match: '/taken' });
    const route = await newRoute(edge.id, everyModule('saml', 'input'));
    const r = await s.patch(`${routes(edge.id)}/${route.id}`, { description: 'changed', compression: { enabled: true }, ip_restriction: { ip_policy_ids: [] }, ...bad });
    expectError(r, status);
    expect((await s.get(`${routes(edge.id)}/${route.id}`)).body).toEqual(route);
  });
});

function oidcInput() {
  return { issuer: 'https://id.example.com', client_id: 'c', client_secret: 's' };
}

describe('an IP policy deleted while a route refers to it', () => {
  it('leaves the reference in the read form; the route can still be PATCHed and its module PUT', async () => {
    const edge = await newEdge();
    const kept = (await s.post('/ip_policies', {})).body;
    const doomed = (await s.post('/ip_policies', {})).body;
    const route = await newRoute(edge.id, { ip_restriction: { ip_policy_ids: [kept.id, doomed.id] } });
    expect((await s.del(`/ip_policies/${doomed.id}`)).status).toBe(204);
    const refs = [{ id: kept.id, uri: kept.uri }, { id: doomed.id, uri: doomed.uri }];
    expect((await s.get(`${routes(edge.id)}/${route.id}`)).body.ip_restriction).toEqual({ enabled: true, ip_policies: refs });
    const patched = await s.patch(`${routes(edge.id)}/${route.id}`, { description: 'still fine' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.ip_restriction.ip_policies).toEqual(refs);
    const put = await s.put(`${routes(edge.id)}/${route.id}/ip_restriction`, { enabled: false, ip_policy_ids: [doomed.id, kept.id] });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toEqual({ enabled: false, ip_policies: [refs[1], refs[0]] });
    // A new reference to the deleted policy is refused.
    const other = await newRoute(edge.id, {});
    expectInvalid(await s.put(`${routes(edge.id)}/${other.id}/ip_restriction`, { ip_policy_ids: [doomed.id] }), 'ip_policy_ids', 'ERR_SERVICE_107');
  });
});

describe('write-only secrets', () => {
  it('are null in every response, sealed at rest and never logged', async () => {
    const edge = await newEdge();
    const secrets = ['gh-secret-7c1d', 'oidc-secret-91ab', 'whsec-5e2f'];
    const route = await newRoute(edge.id, {
      oauth: { provider: { github: { client_id: 'id', client_secret: secrets[0] } } },
      webhook_verification: { provider: 'GITHUB', secret: secrets[2] },
    });
    const route2 = await newRoute(edge.id, { oidc: { issuer: 'https://id.example.com', client_id: 'c', client_secret: secrets[1] } });
    const texts = [
      JSON.stringify(route),
      JSON.stringify(route2),
      (await s.get(`/edges/https/${edge.id}`)).text,
      (await s.get('/edges/https')).text,
      (await s.get(`${routes(edge.id)}/${route.id}/oauth`)).text,
      (await s.put(`${routes(edge.id)}/${route2.id}/oidc`, { issuer: 'https://id.example.com', client_id: 'c', client_secret: secrets[1] })).text,
    ];
    for (const t of texts) for (const secret of secrets) expect(t).not.toContain(secret);
    expect(route.oauth.provider.github.client_secret).toBeNull();
    expect(route.webhook_verification).toEqual({ enabled: true, provider: 'GITHUB', secret: null });
    const files = fs.readdirSync(s.dir).map((f) => path.join(s.dir, f)).filter((f) => fs.statSync(f).isFile());
    for (const f of files) for (const secret of secrets) expect(fs.readFileSync(f).includes(secret), `${f} holds ${secret}`).toBe(false);
    for (const secret of secrets) expect(s.logs.join('\n')).not.toContain(secret);
  });
});

const SAML_COMPUTED = ['entity_id', 'metadata_url', 'assertion_consumer_service_url', 'single_logout_url', 'request_signing_certificate_pem'];

describe('SAML', () => {
  it('has a service-provider identity under the public base URL and a signing certificate that stays while SAML does', async () => {
    const edge = await newEdge();
    const route = await newRoute(edge.id, { saml: { idp_metadata: IDP_METADATA } });
    const base = `${s.url}/saml/${route.id}`;
    expect(route.saml).toMatchObject({ entity_id: base, metadata_url: `${base}/metadata`, assertion_consumer_service_url: `${base}/acs`, single_logout_url: `${base}/slo` });
    const cert = new crypto.X509Certificate(route.saml.request_signing_certificate_pem);
    expect(cert.subject).toContain(route.id);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(Date.now() + 365 * 86_400_000);
    expect(cert.publicKey.asymmetricKeyType).toBe('rsa');

    const replaced = await s.put(`${routes(edge.id)}/${route.id}/saml`, { idp_metadata: IDP_METADATA, force_authn: true });
    expect(replaced.body.request_signing_certificate_pem).toBe(route.saml.request_signing_certificate_pem);
    const patched = await s.patch(`${routes(edge.id)}/${route.id}`, { description: 'x' });
    expect(patched.body.saml.request_signing_certificate_pem).toBe(route.saml.request_signing_certificate_pem);

    expect((await s.del(`${routes(edge.id)}/${route.id}/saml`)).status).toBe(204);
    const again = await s.put(`${routes(edge.id)}/${route.id}/saml`, { idp_metadata: IDP_METADATA });
    expect(again.body.request_signing_certificate_pem).not.toBe(route.saml.request_signing_certificate_pem);
    const other = await newRoute(edge.id, { saml: { idp_metadata: IDP_METADATA } });
    expect(other.saml.request_signing_certificate_pem).not.toBe(again.body.request_signing_certificate_pem);
  });

  it('the OpenAPI document marks the computed fields read-only on PUT and always present on read', async () => {
    const doc = (await s.get('/openapi.json', { token: null, version: null })).body;
    const at = doc.paths['/edges/https/{edge_id}/routes/{id}/saml'];
    const input = at.put.requestBody.content['application/json'].schema;
    const read = at.get.responses['200'].content['application/json'].schema.anyOf[0];
    for (const f of SAML_COMPUTED) {
      expect(input.properties[f].readOnly, f).toBe(true);
      expect(read.required, f).toContain(f);
      expect(read.properties[f], f).toEqual({ type: 'string' });
    }
  });

  it.each(SAML_COMPUTED)('refuses %s on input: the server sets it', async (field) => {
    const edge = await newEdge();
    const r = await s.post(routes(edge.id), { match_type: 'exact_path', match: '/', saml: { idp_metadata: IDP_METADATA, [field]: 'x' } });
    const body = expectInvalid(r, `saml.${field}`);
    expect(body.details.reason).toMatch(/set by the server/);
  });
});
