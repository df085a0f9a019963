// SPEC's field tables, read as an outside tester reads them: for every resource a client
// can create, the representation returned by create, get, list and PATCH carries every
// field SPEC (or DECISIONS, for the resources SPEC only names) lists, under SPEC's name and
// with SPEC's type; Refs are {id, uri} with absolute uris; write-only values never appear.
// The field lists are written out here from the documents, not derived from the catalog,
// so a catalog that drifts from SPEC fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import { ID, RFC3339 } from '../helpers/api.js';
import { caPem, freshHostport } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

type Doc = Record<string, any>;
/** What a field must look like: a JSON type, a Ref, a list of Refs, or a timestamp. */
type Shape = 'string' | 'string?' | 'boolean' | 'number' | 'object' | 'object?' | 'list' | 'map' | 'map?' | 'ref' | 'refs' | 'time' | 'time?' | 'null';

const ROUTE_MODULES = ['backend', 'ip_restriction', 'circuit_breaker', 'compression', 'request_headers', 'response_headers', 'webhook_verification', 'oauth', 'saml', 'oidc', 'websocket_tcp_converter', 'user_agent_filter', 'traffic_policy'];
const common = { id: 'string', uri: 'string', created_at: 'time', description: 'string', metadata: 'string' } as const;

interface Case {
  name: string;
  /** Collection path; `{edge_id}` is replaced by a fresh HTTPS edge. */
  path: string;
  prefix: string;
  envelope?: string;
  body: () => Promise<Doc>;
  fields: Record<string, Shape>;
  /** Keys SPEC says are never part of the representation. */
  absent?: string[];
}

const cases: Case[] = [
  { name: 'API key', path: '/api_keys', prefix: 'ak', envelope: 'keys', body: async () => ({}), fields: { ...common, token: 'string?', owner_id: 'string' } },
  { name: 'IP policy', path: '/ip_policies', prefix: 'ipp', envelope: 'ip_policies', body: async () => ({}), fields: { ...common } },
  {
    name: 'IP policy rule', path: '/ip_policy_rules', prefix: 'ipr', envelope: 'ip_policy_rules',
    body: async () => ({ ip_policy_id: (await s.post('/ip_policies', {})).body.id, cidr: '192.0.2.0/24', action: 'deny' }),
    fields: { ...common, cidr: 'string', ip_policy: 'ref', action: 'string' },
  },
  {
    name: 'SSH certificate authority', path: '/ssh_certificate_authorities', prefix: 'sshca', envelope: 'ssh_certificate_authorities',
    body: async () => ({ private_key_type: 'ecdsa', elliptic_curve: 'p384' }),
    fields: { ...common, public_key: 'string', key_type: 'string' },
    absent: ['private_key', 'private_key_pem'],
  },
  {
    name: 'SSH user certificate', path: '/ssh_user_certificates', prefix: 'sucrt', envelope: 'ssh_user_certificates',
    body: async () => {
      const ca = (await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' })).body;
      return { ssh_certificate_authority_id: ca.id, public_key: ca.public_key, principals: ['deploy'] };
    },
    fields: {
      ...common, public_key: 'string', key_type: 'string', ssh_certificate_authority_id: 'string', principals: 'list',
      critical_options: 'map', extensions: 'map', valid_after: 'time', valid_until: 'time', certificate: 'string',
    },
  },
  {
    name: 'TLS certificate', path: '/tls_certificates', prefix: 'cert', envelope: 'tls_certificates',
    body: async () => {
      const c = issueCertificate({ subject: { commonName: 'fields.example.com' }, key: { type: 'ed25519' } });
      return { certificate_pem: c.certificatePem, private_key_pem: c.privateKeyPem };
    },
    fields: {
      ...common, certificate_pem: 'string', subject_common_name: 'string', subject_alternative_names: 'object', issued_at: 'time?',
      not_before: 'time', not_after: 'time', key_usages: 'list', extended_key_usages: 'list', private_key_type: 'string',
      issuer_common_name: 'string', serial_number: 'string', subject_organization: 'string', subject_organizational_unit: 'string',
      subject_locality: 'string', subject_province: 'string', subject_country: 'string',
    },
    absent: ['private_key_pem'],
  },
  {
    name: 'tunnel-group backend', path: '/backends/tunnel_group', prefix: 'bkdtg', envelope: 'backends',
    body: async () => ({ labels: { env: 'prod' } }), fields: { ...common, labels: 'map', tunnels: 'refs' },
  },
  {
    name: 'HTTP-response backend', path: '/backends/http_response', prefix: 'bkdhr', envelope: 'backends',
    body: async () => ({ body: 'teapot', headers: { 'Content-Type': 'text/plain' }, status_code: 418 }),
    fields: { ...common, body: 'string', headers: 'map?', status_code: 'number' },
  },
  {
    name: 'weighted backend', path: '/backends/weighted', prefix: 'bkdwd', envelope: 'backends',
    body: async () => ({ backends: { [(await s.post('/backends/tunnel_group', {})).body.id]: 10000 } }),
    fields: { ...common, backends: 'map' },
  },
  {
    name: 'HTTPS edge', path: '/edges/https', prefix: 'edghts', envelope: 'https_edges',
    body: async () => ({ hostports: [freshHostport()] }),
    fields: { ...common, hostports: 'list', mutual_tls: 'object?', tls_termination: 'object?', routes: 'list' },
  },
  {
    name: 'HTTPS edge route', path: '/edges/https/{edge_id}/routes', prefix: 'edghtsrt',
    body: async () => ({ match_type: 'path_prefix', match: '/api' }),
    fields: { ...common, edge_id: 'string', match_type: 'string', match: 'string', ...Object.fromEntries(ROUTE_MODULES.map((m) => [m, 'object?' as const])) },
  },
  {
    name: 'event subscription', path: '/event_subscriptions', prefix: 'esb', envelope: 'event_subscriptions',
    body: async () => ({ sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [(await s.post('/event_destinations', { target: { log: {} } })).body.id] }),
    fields: { ...common, sources: 'list', destinations: 'refs' },
  },
  // Resources SPEC only names; their fields are DECISIONS'.
  {
    name: 'TCP edge', path: '/edges/tcp', prefix: 'edgtcp', envelope: 'tcp_edges',
    body: async () => ({ hostports: [freshHostport()] }),
    fields: { ...common, hostports: 'list', backend: 'object?', ip_restriction: 'object?', traffic_policy: 'object?' },
  },
  {
    name: 'TLS edge', path: '/edges/tls', prefix: 'edgtls', envelope: 'tls_edges',
    body: async () => ({ hostports: [freshHostport()] }),
    fields: { ...common, hostports: 'list', backend: 'object?', ip_restriction: 'object?', mutual_tls: 'object?', tls_termination: 'object?', traffic_policy: 'object?' },
  },
  {
    name: 'certificate authority', path: '/certificate_authorities', prefix: 'ca', envelope: 'certificate_authorities',
    body: async () => ({ ca_pem: caPem('Fields CA') }),
    fields: { ...common, subject_common_name: 'string', not_before: 'time', not_after: 'time', key_usages: 'list', extended_key_usages: 'list' },
  },
  {
    name: 'event destination', path: '/event_destinations', prefix: 'ed', envelope: 'event_destinations',
    body: async () => ({ target: { http: { url: 'https://hooks.example.com/in', secret: 'hmac-key' } } }),
    fields: { ...common, format: 'string', target: 'object' },
  },
  {
    name: 'credential', path: '/credentials', prefix: 'cr', envelope: 'credentials',
    body: async () => ({ acl: ['bind:*.example.com'] }),
    fields: { ...common, token: 'string?', acl: 'list', owner_id: 'string' },
  },
];

const isRef = (v: unknown) =>
  typeof v === 'object' && v !== null && Object.keys(v).sort().join() === 'id,uri' && ID.test((v as Doc).id) && (v as Doc).uri === `${s.url}${new URL((v as Doc).uri).pathname}` && (v as Doc).uri.endsWith(`/${(v as Doc).id}`);
const isMap = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

function fits(v: unknown, shape: Shape): boolean {
  switch (shape) {
    case 'string': return typeof v === 'string';
    case 'string?': return v === null || typeof v === 'string';
    case 'boolean': return typeof v === 'boolean';
    case 'number': return typeof v === 'number';
    case 'object': return isMap(v);
    case 'object?': return v === null || isMap(v);
    case 'list': return Array.isArray(v);
    case 'map': return isMap(v);
    case 'map?': return v === null || isMap(v);
    case 'ref': return isRef(v);
    case 'refs': return Array.isArray(v) && v.every(isRef);
    case 'time': return typeof v === 'string' && RFC3339.test(v);
    case 'time?': return v === null || (typeof v === 'string' && RFC3339.test(v));
    case 'null': return v === null;
  }
}

/** Every SPEC field present with SPEC's type; the id has the kind's prefix and the uri is absolute. */
function expectSpecFields(doc: Doc, c: Case, where: string) {
  const wrong = Object.entries(c.fields).filter(([k, shape]) => !(k in doc) || !fits(doc[k], shape)).map(([k, shape]) => `${k} (want ${shape}, got ${JSON.stringify(doc[k])?.slice(0, 60)})`);
  expect(wrong, `${c.name} ${where}`).toEqual([]);
  expect(doc.id).toMatch(new RegExp(`^${c.prefix}_[0-9A-Za-z]{27}$`));
  expect(doc.uri).toBe(`${s.url}${new URL(doc.uri).pathname}`);
  expect(doc.uri.endsWith(`/${doc.id}`)).toBe(true);
  for (const k of c.absent ?? []) expect(doc, `${c.name} ${where} has no ${k}`).not.toHaveProperty(k);
}

async function collection(path: string): Promise<string> {
  if (!path.includes('{edge_id}')) return path;
  return path.replace('{edge_id}', (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id);
}

describe.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
  it('create, get, list and PATCH each return every field SPEC lists, with its type', async () => {
    const path = await collection(c.path);
    const made = await s.post(path, await c.body());
    expect(made.status, made.text).toBe(201);
    expectSpecFields(made.body, c, 'create');
    const at = new URL(made.body.uri).pathname;
    expect(at).toBe(`${path}/${made.body.id}`);

    const got = await s.get(at);
    expect(got.status).toBe(200);
    expectSpecFields(got.body, c, 'get');

    if (c.envelope) {
      const list = await s.get(`${path}?limit=100`);
      expect(list.status).toBe(200);
      expect(Object.keys(list.body).sort()).toEqual([c.envelope, 'next_page_uri', 'uri'].sort());
      const entry = list.body[c.envelope].find((e: Doc) => e.id === made.body.id);
      expect(entry, `${c.name} is in its list`).toBeDefined();
      expectSpecFields(entry, c, 'list');
    }

    const patched = await s.patch(at, { description: 'changed', metadata: '{"team":"edge"}' });
    expect(patched.status, patched.text).toBe(200);
    expectSpecFields(patched.body, c, 'PATCH');
    expect(patched.body).toMatchObject({ description: 'changed', metadata: '{"team":"edge"}' });
    expect(patched.body.created_at).toBe(made.body.created_at);
  });
});

describe('values SPEC fixes in the representation', () => {
  it.each([
    {
      reason: 'an API key token is in the creation response only, null on get and list',
      check: async () => {
        const made = (await s.post('/api_keys', {})).body;
        expect(typeof made.token).toBe('string');
        expect((await s.get(`/api_keys/${made.id}`)).body.token).toBeNull();
        expect((await s.get('/api_keys')).body.keys.every((k: Doc) => k.token === null)).toBe(true);
      },
    },
    {
      reason: 'SSH user certificate defaults: extensions permit-pty and permit-user-rc with "" values, valid_until 24 h after valid_after (now)',
      check: async () => {
        const ca = (await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' })).body;
        const c = (await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: ca.public_key })).body;
        expect(c.extensions).toEqual({ 'permit-pty': '', 'permit-user-rc': '' });
        expect(c.principals).toEqual([]);
        expect(c.critical_options).toEqual({});
        expect(Date.parse(c.valid_until) - Date.parse(c.valid_after)).toBe(24 * 3600 * 1000);
        expect(Math.abs(Date.parse(c.valid_after) - Date.parse(c.created_at))).toBeLessThanOrEqual(1000);
        expect(c.key_type).toBe('ed25519');
      },
    },
    {
      reason: 'a user-uploaded TLS certificate has issued_at null, absent subject attributes "", SANs as {dns_names, ips}',
      check: async () => {
        const cert = issueCertificate({ subject: { commonName: 'only-cn.example.com' } });
        const c = (await s.post('/tls_certificates', { certificate_pem: cert.certificatePem, private_key_pem: cert.privateKeyPem })).body;
        expect(c.issued_at).toBeNull();
        expect(c.subject_alternative_names).toEqual({ dns_names: [], ips: [] });
        for (const k of ['subject_organization', 'subject_organizational_unit', 'subject_locality', 'subject_province', 'subject_country']) expect(c[k]).toBe('');
        expect(c.private_key_type).toBe('ecdsa');
      },
    },
    {
      reason: 'a new HTTPS edge has routes [] and both modules null; a new route has all thirteen modules null',
      check: async () => {
        const edge = (await s.post('/edges/https', { hostports: [freshHostport()] })).body;
        expect(edge).toMatchObject({ routes: [], mutual_tls: null, tls_termination: null });
        const route = (await s.post(`/edges/https/${edge.id}/routes`, { match_type: 'exact_path', match: '/x' })).body;
        for (const m of ROUTE_MODULES) expect(route[m], m).toBeNull();
        expect(route.edge_id).toBe(edge.id);
      },
    },
    {
      reason: 'every module defaults enabled to true when unspecified',
      check: async () => {
        const edge = (await s.post('/edges/https', { hostports: [freshHostport()], mutual_tls: {}, tls_termination: {} })).body;
        expect(edge.mutual_tls).toEqual({ enabled: true, certificate_authorities: [] });
        expect(edge.tls_termination).toEqual({ enabled: true, terminate_at: 'edge', min_version: '1.2' });
        const route = (await s.post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/y', compression: {}, websocket_tcp_converter: {}, circuit_breaker: {} })).body;
        expect(route.compression).toEqual({ enabled: true });
        expect(route.websocket_tcp_converter).toEqual({ enabled: true });
        expect(route.circuit_breaker.enabled).toBe(true);
      },
    },
    {
      reason: 'an event subscription source reads back as {type, uri} with uri = subscription uri + /sources/<type>',
      check: async () => {
        const ed = (await s.post('/event_destinations', { target: { log: {} } })).body;
        const sub = (await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }, { type: 'https_edge_deleted.v0' }], destination_ids: [ed.id] })).body;
        expect(sub.sources).toEqual([
          { type: 'ip_policy_created.v0', uri: `${sub.uri}/sources/ip_policy_created.v0` },
          { type: 'https_edge_deleted.v0', uri: `${sub.uri}/sources/https_edge_deleted.v0` },
        ]);
        expect(sub.destinations).toEqual([{ id: ed.id, uri: ed.uri }]);
      },
    },
    {
      reason: 'the mutual TLS and TCP/TLS backend modules take ids on input and read as Refs only',
      check: async () => {
        const ca = (await s.post('/certificate_authorities', { ca_pem: caPem('mtls') })).body;
        const b = (await s.post('/backends/http_response', {})).body;
        const edge = (await s.post('/edges/tls', { hostports: [freshHostport()], mutual_tls: { certificate_authority_ids: [ca.id] }, backend: { backend_id: b.id } })).body;
        expect(edge.mutual_tls).toEqual({ enabled: true, certificate_authorities: [{ id: ca.id, uri: ca.uri }] });
        expect(edge.backend).toEqual({ enabled: true, backend: { id: b.id, uri: b.uri } });
      },
    },
  ])('$reason', async ({ check }) => { await check(); });
});

describe('webhook_verification provider: senders a client is likely to name are known', () => {
  // SPEC leaves the list open and DECISIONS says "a known provider id"; these are common
  // webhook senders whose signatures are verifiable with a shared secret.
  const senders = ['github', 'stripe', 'slack', 'twilio', 'shopify', 'paypal', 'heroku', 'segment', 'postmark', 'mandrill', 'trello', 'box', 'docusign', 'microsoft_teams', 'contentful', 'braintree'];
  let edge: string;
  beforeAll(async () => { edge = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id; });

  it.each(senders)('%s is accepted (upper case too) and echoed as given, its secret null', async (provider) => {
    const route = (await s.post(`/edges/https/${edge}/routes`, { match_type: 'exact_path', match: `/hooks/${provider}` })).body;
    const at = `/edges/https/${edge}/routes/${route.id}/webhook_verification`;
    for (const given of [provider, provider.toUpperCase()]) {
      const r = await s.put(at, { provider: given, secret: 'whsec_abc' });
      expect(r.status, r.text).toBe(200);
      expect(r.body).toEqual({ enabled: true, provider: given, secret: null });
    }
  });
});

describe('null on input: an optional field given null has no value, as SPEC reads null in responses', () => {
  const ipPolicy = async () => (await s.post('/ip_policies', {})).body.id;
  it.each([
    { reason: 'description and metadata null on create read as ""', path: async () => '/ip_policies', body: async () => ({ description: null, metadata: null }), want: { description: '', metadata: '' } },
    { reason: 'owner_id null on API key create defaults to the caller', path: async () => '/api_keys', body: async () => ({ owner_id: null }), want: { owner_id: expect.stringMatching(/^usr_/) } },
    { reason: "an ed25519 SSH CA's read form (elliptic_curve and key_size null) sent back", path: async () => '/ssh_certificate_authorities', body: async () => ({ private_key_type: 'ed25519', elliptic_curve: null, key_size: null }), want: { key_type: 'ed25519', elliptic_curve: null, key_size: null } },
    { reason: 'HTTP-response backend body and status_code null take their defaults', path: async () => '/backends/http_response', body: async () => ({ body: null, status_code: null, headers: null }), want: { body: '', status_code: 200, headers: {} } },
    { reason: 'module fields null inside a module take their defaults', path: async () => '/edges/https', body: async () => ({ hostports: [freshHostport()], tls_termination: { enabled: null, min_version: null } }), want: { tls_termination: { enabled: true, terminate_at: 'edge', min_version: '1.2' } } },
    { reason: "an OAuth member's read form with client_id and client_secret null (the managed app)", path: async () => `/edges/https/${(await s.post('/edges/https', { hostports: [freshHostport()] })).body.id}/routes`, body: async () => ({ match_type: 'path_prefix', match: '/', oauth: { provider: { google: { client_id: null, client_secret: null, scopes: [], email_addresses: ['a@example.com'], email_domains: [] }, github: null } } }), want: { oauth: expect.objectContaining({ provider: expect.objectContaining({ google: { client_id: null, client_secret: null, scopes: [], email_addresses: ['a@example.com'], email_domains: [] }, github: null }) }) } },
  ])('$reason', async ({ path, body, want }) => {
    const r = await s.post(await path(), await body());
    expect(r.status, r.text).toBe(201);
    expect(r.body).toMatchObject(want);
  });

  it.each([
    { reason: 'a required field (rule action) null is still refused, naming it', body: async () => ({ ip_policy_id: await ipPolicy(), cidr: '198.51.100.0/24', action: null }), field: 'action' },
    { reason: 'the owning policy id null is still refused', body: async () => ({ ip_policy_id: null, cidr: '198.51.100.0/24', action: 'allow' }), field: 'ip_policy_id' },
  ])('$reason', async ({ body, field }) => {
    const r = await s.post('/ip_policy_rules', await body());
    expect(r.status, r.text).toBe(400);
    expect(r.body.details.field).toBe(field);
  });

  it.each([
    { reason: 'action null (no value) leaves it as it was', body: { action: null, description: 'kept' }, status: 200 },
    { reason: 'ip_policy_id null leaves it as it was', body: { ip_policy_id: null }, status: 200 },
    { reason: 'action with a value is still refused: it cannot change', body: { action: 'deny' }, status: 400 },
  ])('PATCH of an IP policy rule: $reason', async ({ body, status }) => {
    const rule = (await s.post('/ip_policy_rules', { ip_policy_id: await ipPolicy(), cidr: '203.0.113.0/24', action: 'allow' })).body;
    const r = await s.patch(`/ip_policy_rules/${rule.id}`, body);
    expect(r.status, r.text).toBe(status);
    if (status === 200) expect(r.body).toMatchObject({ action: 'allow', ip_policy: rule.ip_policy });
    else expect(r.body.details.field).toBe('action');
  });

  it('a module PUT with null for optional fields takes their defaults', async () => {
    const edge = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id;
    const route = (await s.post(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match: '/' })).body.id;
    const r = await s.put(`/edges/https/${edge}/routes/${route}/circuit_breaker`, { enabled: null, num_buckets: null, error_threshold_percentage: 0.25 });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ enabled: true, num_buckets: 10, error_threshold_percentage: 0.25 });
  });
});
