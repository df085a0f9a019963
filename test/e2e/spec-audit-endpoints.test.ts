// SPEC.md from "Endpoints" to the end, read as an outside tester reads it: every row of
// SPEC's endpoint tables at the path written there, with its status and list envelope;
// identifiers as opaque strings after their prefix; agent commands ignoring their body;
// and each limit of SPEC's "Limits" section at its boundary (the maximum accepted, one
// past it refused with a 400 naming the field).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import { expectError, expectInvalid, unknownId } from '../helpers/api.js';
import { caPem, freshHostport } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;

let s: TestServer;
let userKey: string;
beforeAll(async () => {
  s = await startTestServer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-audit-'));
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'audit', '-f', path.join(dir, 'key')]);
  userKey = fs.readFileSync(path.join(dir, 'key.pub'), 'utf8').trim();
  fs.rmSync(dir, { recursive: true, force: true });
});
afterAll(async () => { await s.close(); });

/** What earlier rows created, by name, for the rows after them. */
const made: Record<string, Doc> = {};
const id = (name: string) => made[name].id as string;

interface Row {
  reason: string;
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  path: () => string;
  body?: () => Doc;
  status: 200 | 201 | 204 | 404;
  /** The list envelope's collection key. */
  envelope?: string;
  /** Keep the response body under this name. */
  save?: string;
  check?: (body: Doc) => void;
}

const tls = issueCertificate({ subject: { commonName: 'audit.example.com' }, dnsNames: ['audit.example.com'] });

// In SPEC's order. Deletes come last, children before what they refer to.
const ROWS: Row[] = [
  { reason: 'API key create returns the token', method: 'POST', path: () => '/api_keys', body: () => ({ description: 'd', metadata: 'm' }), status: 201, save: 'key', check: (b) => expect(typeof b.token).toBe('string') },
  { reason: 'API key list', method: 'GET', path: () => '/api_keys', status: 200, envelope: 'keys' },
  { reason: 'API key get has a null token', method: 'GET', path: () => `/api_keys/${id('key')}`, status: 200, check: (b) => expect(b.token).toBeNull() },
  { reason: 'API key PATCH', method: 'PATCH', path: () => `/api_keys/${id('key')}`, body: () => ({ description: 'd2', metadata: 'm2' }), status: 200, check: (b) => expect(b).toMatchObject({ description: 'd2', metadata: 'm2', token: null }) },
  { reason: 'tunnel session list (online sessions)', method: 'GET', path: () => '/tunnel_sessions', status: 200, envelope: 'tunnel_sessions' },
  { reason: 'tunnel session get of a session not online', method: 'GET', path: () => `/tunnel_sessions/${unknownId('ts')}`, status: 404 },
  { reason: 'restart of a session not online', method: 'POST', path: () => `/tunnel_sessions/${unknownId('ts')}/restart`, body: () => ({}), status: 404 },
  { reason: 'stop of a session not online', method: 'POST', path: () => `/tunnel_sessions/${unknownId('ts')}/stop`, body: () => ({}), status: 404 },
  { reason: 'update of a session not online', method: 'POST', path: () => `/tunnel_sessions/${unknownId('ts')}/update`, body: () => ({}), status: 404 },
  { reason: 'tunnel list (online tunnels)', method: 'GET', path: () => '/tunnels', status: 200, envelope: 'tunnels' },
  { reason: 'tunnel get of a tunnel not online', method: 'GET', path: () => `/tunnels/${unknownId('tn')}`, status: 404 },
  { reason: 'IP policy create', method: 'POST', path: () => '/ip_policies', body: () => ({ description: 'd', metadata: 'm' }), status: 201, save: 'policy' },
  { reason: 'IP policy list', method: 'GET', path: () => '/ip_policies', status: 200, envelope: 'ip_policies' },
  { reason: 'IP policy get', method: 'GET', path: () => `/ip_policies/${id('policy')}`, status: 200 },
  { reason: 'IP policy PATCH', method: 'PATCH', path: () => `/ip_policies/${id('policy')}`, body: () => ({ description: 'd2', metadata: 'm2' }), status: 200 },
  { reason: 'IP policy rule create', method: 'POST', path: () => '/ip_policy_rules', body: () => ({ cidr: '192.0.2.0/24', ip_policy_id: id('policy'), action: 'deny' }), status: 201, save: 'rule' },
  { reason: 'IP policy rule list', method: 'GET', path: () => '/ip_policy_rules', status: 200, envelope: 'ip_policy_rules' },
  { reason: 'IP policy rule get', method: 'GET', path: () => `/ip_policy_rules/${id('rule')}`, status: 200 },
  { reason: 'IP policy rule PATCH of description, metadata and cidr', method: 'PATCH', path: () => `/ip_policy_rules/${id('rule')}`, body: () => ({ description: 'd', metadata: 'm', cidr: '198.51.100.0/24' }), status: 200, check: (b) => expect(b.cidr).toBe('198.51.100.0/24') },
  { reason: 'SSH CA create', method: 'POST', path: () => '/ssh_certificate_authorities', body: () => ({ private_key_type: 'ed25519' }), status: 201, save: 'sshca' },
  { reason: 'SSH CA list', method: 'GET', path: () => '/ssh_certificate_authorities', status: 200, envelope: 'ssh_certificate_authorities' },
  { reason: 'SSH CA get', method: 'GET', path: () => `/ssh_certificate_authorities/${id('sshca')}`, status: 200 },
  { reason: 'SSH CA PATCH', method: 'PATCH', path: () => `/ssh_certificate_authorities/${id('sshca')}`, body: () => ({ description: 'd', metadata: 'm' }), status: 200 },
  {
    reason: 'SSH user certificate create with every body field of SPEC\'s table',
    method: 'POST',
    path: () => '/ssh_user_certificates',
    body: () => ({
      ssh_certificate_authority_id: id('sshca'), public_key: userKey, principals: ['ops'], critical_options: {}, extensions: { 'permit-pty': '' },
      valid_after: new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, 'Z'), valid_until: new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z'), description: 'd', metadata: 'm',
    }),
    status: 201,
    save: 'sshcert',
  },
  { reason: 'SSH user certificate list', method: 'GET', path: () => '/ssh_user_certificates', status: 200, envelope: 'ssh_user_certificates' },
  { reason: 'SSH user certificate get', method: 'GET', path: () => `/ssh_user_certificates/${id('sshcert')}`, status: 200 },
  { reason: 'SSH user certificate PATCH (the sample\'s description and metadata)', method: 'PATCH', path: () => `/ssh_user_certificates/${id('sshcert')}`, body: () => ({ description: 'd2', metadata: 'm2' }), status: 200 },
  { reason: 'TLS certificate create', method: 'POST', path: () => '/tls_certificates', body: () => ({ certificate_pem: tls.certificatePem, private_key_pem: tls.privateKeyPem, description: 'd', metadata: 'm' }), status: 201, save: 'cert' },
  { reason: 'TLS certificate list', method: 'GET', path: () => '/tls_certificates', status: 200, envelope: 'tls_certificates' },
  { reason: 'TLS certificate get', method: 'GET', path: () => `/tls_certificates/${id('cert')}`, status: 200 },
  ...(['tunnel_group', 'http_response', 'weighted'] as const).flatMap((kind): Row[] => {
    const bodies = {
      tunnel_group: () => ({ description: 'd', metadata: 'm', labels: { app: 'web' } }),
      http_response: () => ({ description: 'd', metadata: 'm', body: 'ok', headers: { 'x-a': '1' }, status_code: 200 }),
      weighted: () => ({ description: 'd', metadata: 'm', backends: { [id('tunnel_group')]: 1 } }),
    };
    const at = `/backends/${kind}`;
    return [
      { reason: `${kind} backend create`, method: 'POST', path: () => at, body: bodies[kind], status: 201, save: kind },
      { reason: `${kind} backend list`, method: 'GET', path: () => at, status: 200, envelope: 'backends' },
      { reason: `${kind} backend get`, method: 'GET', path: () => `${at}/${id(kind)}`, status: 200 },
      { reason: `${kind} backend PATCH with every create field`, method: 'PATCH', path: () => `${at}/${id(kind)}`, body: bodies[kind], status: 200 },
    ];
  }),
  { reason: 'certificate authority for mutual TLS', method: 'POST', path: () => '/certificate_authorities', body: () => ({ ca_pem: caPem() }), status: 201, save: 'ca' },
  {
    reason: 'HTTPS edge create: routes empty, modules null',
    method: 'POST',
    path: () => '/edges/https',
    body: () => ({ description: 'd', metadata: 'm', hostports: [freshHostport()] }),
    status: 201,
    save: 'edge',
    check: (b) => expect(b).toMatchObject({ routes: [], mutual_tls: null, tls_termination: null }),
  },
  {
    reason: 'HTTPS edge create with mutual_tls and tls_termination',
    method: 'POST',
    path: () => '/edges/https',
    body: () => ({ hostports: [freshHostport()], mutual_tls: { enabled: true, certificate_authority_ids: [id('ca')] }, tls_termination: { enabled: true, min_version: '1.3' } }),
    status: 201,
  },
  {
    reason: 'route create with backend and ip_restriction modules',
    method: 'POST',
    path: () => `/edges/https/${id('edge')}/routes`,
    body: () => ({ match_type: 'path_prefix', match: '/', description: 'd', metadata: 'm', backend: { enabled: true, backend_id: id('http_response') }, ip_restriction: { enabled: true, ip_policy_ids: [id('policy')] } }),
    status: 201,
    save: 'route',
  },
  ...([
    ['circuit_breaker', { enabled: true, error_threshold_percentage: 0.5 }],
    ['response_headers', { enabled: true, add: { 'x-served-by': 'edge' }, remove: ['server'] }],
    ['oidc', { enabled: true, issuer: 'https://id.example.com', client_id: 'c', client_secret: 's' }],
  ] as const).flatMap(([module, body]): Row[] => {
    const at = () => `/edges/https/${id('edge')}/routes/${id('route')}/${module}`;
    return [
      { reason: `${module} PUT answers the module`, method: 'PUT', path: at, body: () => body, status: 200, check: (b) => expect(b.enabled).toBe(true) },
      { reason: `${module} GET`, method: 'GET', path: at, status: 200 },
      { reason: `${module} DELETE`, method: 'DELETE', path: at, status: 204 },
    ];
  }),
  { reason: 'OAuth PUT', method: 'PUT', path: () => `/edges/https/${id('edge')}/routes/${id('route')}/oauth`, body: () => ({ provider: { google: { client_id: 'c', client_secret: 's' } } }), status: 200 },
  {
    reason: 'HTTPS edge mutual_tls PUT answers { enabled, certificate_authorities }',
    method: 'PUT',
    path: () => `/edges/https/${id('edge')}/mutual_tls`,
    body: () => ({ enabled: true, certificate_authority_ids: [id('ca')] }),
    status: 200,
    check: (b) => expect(b).toEqual({ enabled: true, certificate_authorities: [{ id: id('ca'), uri: made.ca.uri }] }),
  },
  { reason: 'HTTPS edge mutual_tls GET', method: 'GET', path: () => `/edges/https/${id('edge')}/mutual_tls`, status: 200 },
  { reason: 'HTTPS edge mutual_tls DELETE', method: 'DELETE', path: () => `/edges/https/${id('edge')}/mutual_tls`, status: 204 },
  ...(['tcp', 'tls'] as const).flatMap((kind): Row[] => {
    const at = () => `/edges/${kind}/${id(kind)}/backend`;
    return [
      { reason: `${kind.toUpperCase()} edge to carry a backend module`, method: 'POST', path: () => `/edges/${kind}`, body: () => ({}), status: 201, save: kind },
      {
        reason: `${kind.toUpperCase()} edge backend PUT answers { enabled, backend }`,
        method: 'PUT',
        path: at,
        body: () => ({ enabled: true, backend_id: id('tunnel_group') }),
        status: 200,
        check: (b) => expect(b).toEqual({ enabled: true, backend: { id: id('tunnel_group'), uri: made.tunnel_group.uri } }),
      },
      { reason: `${kind.toUpperCase()} edge backend GET`, method: 'GET', path: at, status: 200 },
      { reason: `${kind.toUpperCase()} edge backend DELETE`, method: 'DELETE', path: at, status: 204 },
    ];
  }),
  { reason: 'event destination for a subscription', method: 'POST', path: () => '/event_destinations', body: () => ({ target: { log: {} } }), status: 201, save: 'destination' },
  {
    reason: 'event subscription create; sources read as { type, uri }, destinations as Refs',
    method: 'POST',
    path: () => '/event_subscriptions',
    body: () => ({ description: 'd', metadata: 'm', sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [id('destination')] }),
    status: 201,
    save: 'subscription',
    check: (b) => {
      expect(b.sources).toEqual([{ type: 'ip_policy_created.v0', uri: `${b.uri}/sources/ip_policy_created.v0` }]);
      expect(b.destinations).toEqual([{ id: id('destination'), uri: made.destination.uri }]);
    },
  },
  { reason: 'event subscription list', method: 'GET', path: () => '/event_subscriptions', status: 200, envelope: 'event_subscriptions' },
  { reason: 'event subscription get', method: 'GET', path: () => `/event_subscriptions/${id('subscription')}`, status: 200 },
  {
    reason: 'event subscription PATCH of every field',
    method: 'PATCH',
    path: () => `/event_subscriptions/${id('subscription')}`,
    body: () => ({ description: 'd2', metadata: 'm2', sources: [{ type: 'ip_policy_deleted.v0' }], destination_ids: [id('destination')] }),
    status: 200,
  },
  { reason: 'event subscription DELETE', method: 'DELETE', path: () => `/event_subscriptions/${id('subscription')}`, status: 204 },
  { reason: 'weighted backend DELETE', method: 'DELETE', path: () => `/backends/weighted/${id('weighted')}`, status: 204 },
  { reason: 'HTTPS edge DELETE (its routes go with it)', method: 'DELETE', path: () => `/edges/https/${id('edge')}`, status: 204 },
  { reason: 'HTTP-response backend DELETE once no route uses it', method: 'DELETE', path: () => `/backends/http_response/${id('http_response')}`, status: 204 },
  { reason: 'TLS certificate DELETE', method: 'DELETE', path: () => `/tls_certificates/${id('cert')}`, status: 204 },
  { reason: 'SSH user certificate DELETE', method: 'DELETE', path: () => `/ssh_user_certificates/${id('sshcert')}`, status: 204 },
  { reason: 'SSH CA DELETE', method: 'DELETE', path: () => `/ssh_certificate_authorities/${id('sshca')}`, status: 204 },
  { reason: 'IP policy rule DELETE', method: 'DELETE', path: () => `/ip_policy_rules/${id('rule')}`, status: 204 },
  { reason: 'IP policy DELETE', method: 'DELETE', path: () => `/ip_policies/${id('policy')}`, status: 204 },
  { reason: 'API key DELETE', method: 'DELETE', path: () => `/api_keys/${id('key')}`, status: 204 },
];

describe('every endpoint of SPEC\'s tables, at its path, in order', () => {
  it.each(ROWS.map((r) => [`${r.method} ${r.reason}`, r] as const))('%s', async (_name, row) => {
    const r = await s.request(row.method, row.path(), row.body?.());
    if (row.status === 404) {
      expectError(r, 404, 'ERR_SERVICE_300');
      return;
    }
    expect(r.status, r.text).toBe(row.status);
    if (row.status === 204) {
      expect(r.text).toBe('');
      return;
    }
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    const at = `${s.url}${row.path()}`;
    if (row.envelope) {
      expect(Object.keys(r.body).sort()).toEqual([row.envelope, 'next_page_uri', 'uri'].sort());
      expect(Array.isArray(r.body[row.envelope])).toBe(true);
      expect(r.body.uri).toBe(at);
    } else if (row.method === 'POST') {
      expect(r.body.uri).toBe(`${at}/${r.body.id}`);
    } else if (r.body.id) {
      expect(r.body.uri).toBe(at);
    }
    if (row.save) made[row.save] = r.body;
    row.check?.(r.body);
  });
});

describe('identifier bodies are opaque (SPEC): only the prefix says which collection an id is of', () => {
  it.each([
    { reason: 'underscores in the body', id: 'ipp_does_not_exist', status: 404 },
    { reason: 'dashes in the body', id: 'ipp_not-a-real-one', status: 404 },
    { reason: 'a one-character body', id: 'ipp_1', status: 404 },
    { reason: 'another collection\'s prefix', id: 'ipr_doesnotexist', status: 400 },
    { reason: 'no prefix at all', id: 'doesnotexist', status: 400 },
    { reason: 'the prefix alone', id: 'ipp_', status: 400 },
  ])('$reason ($id): GET, PATCH and DELETE answer $status', async ({ id: bad, status }) => {
    const code = status === 404 ? 'ERR_SERVICE_300' : 'ERR_SERVICE_105';
    expectError(await s.get(`/ip_policies/${bad}`), status, code);
    expectError(await s.patch(`/ip_policies/${bad}`, { description: 'x' }), status, code);
    expectError(await s.del(`/ip_policies/${bad}`), status, code);
  });

  it('a before_id with such a body is a cursor like any other', async () => {
    expect((await s.get('/ip_policies?before_id=ipp_does_not_exist')).status).toBe(200);
    expectInvalid(await s.get('/ip_policies?before_id=ipr_doesnotexist'), 'before_id', 'ERR_SERVICE_104');
  });
});

describe('agent commands ignore their body (DECISIONS, client compatibility)', () => {
  const bodies = [
    { reason: 'no body', raw: undefined, contentType: null },
    { reason: 'an object with fields', raw: '{"force":true}', contentType: 'application/json' },
    { reason: 'a JSON array', raw: '[]', contentType: 'application/json' },
    { reason: 'JSON cut short', raw: '{"a":', contentType: 'application/json' },
    { reason: 'a text body', raw: 'restart please', contentType: 'text/plain' },
    { reason: 'a body over 1 MiB', raw: JSON.stringify({ pad: 'x'.repeat(1024 * 1024) }), contentType: 'application/json' },
  ];
  it.each(['restart', 'stop', 'update'].flatMap((action) => bodies.map((b) => ({ action, ...b }))))('$action with $reason: judged on the session alone (404, not online)', async ({ action, raw, contentType }) => {
    const r = await s.request('POST', `/tunnel_sessions/${unknownId('ts')}/${action}`, undefined, { raw, contentType });
    expectError(r, 404, 'ERR_SERVICE_300');
  });
});

describe('SPEC "Limits" at the boundary', () => {
  let edge: string;
  let route: string;
  let child: string;
  beforeAll(async () => {
    edge = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id;
    route = (await s.post(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match: '/limits' })).body.id;
    child = (await s.post('/backends/tunnel_group', { labels: { app: 'limits' } })).body.id;
  });

  const config = (over: Doc) => ({ name: 'per-client', algorithm: 'sliding_window', capacity: 100, rate: '60s', bucket_key: ['conn.client_ip'], ...over });
  const policy = (over: Doc, phase = 'on_http_request') => JSON.stringify({ [phase]: [{ actions: [{ type: 'rate-limit', config: config(over) }] }] });
  const AT = 'on_http_request[0].actions[0].config';

  it.each([
    { reason: 'rate-limit name of 1023 characters (fewer than 1024)', over: { name: 'n'.repeat(1023) }, ok: true },
    { reason: 'rate-limit name of 1024 characters', over: { name: 'n'.repeat(1024) }, ok: false, at: 'name' },
    { reason: 'rate-limit capacity 1 (the minimum)', over: { capacity: 1 }, ok: true },
    { reason: 'rate-limit capacity 0', over: { capacity: 0 }, ok: false, at: 'capacity' },
    { reason: 'rate-limit capacity 2,000,000,000 (the maximum)', over: { capacity: 2_000_000_000 }, ok: true },
    { reason: 'rate-limit capacity 2,000,000,001', over: { capacity: 2_000_000_001 }, ok: false, at: 'capacity' },
    { reason: 'rate-limit rate 60s (the minimum)', over: { rate: '60s' }, ok: true },
    { reason: 'rate-limit rate 50s (a multiple of ten under the minimum)', over: { rate: '50s' }, ok: false, at: 'rate' },
    { reason: 'rate-limit rate 90s (SPEC\'s example)', over: { rate: '90s' }, ok: true },
    { reason: 'rate-limit rate 10m (SPEC\'s example)', over: { rate: '10m' }, ok: true },
    { reason: 'rate-limit rate 95s (not a multiple of ten seconds)', over: { rate: '95s' }, ok: false, at: 'rate' },
    { reason: 'rate-limit rate 24h (the maximum)', over: { rate: '24h' }, ok: true },
    { reason: 'rate-limit rate 24h10s (past the maximum)', over: { rate: '24h10s' }, ok: false, at: 'rate' },
    { reason: 'rate-limit bucket_key of ten entries', over: { bucket_key: Array(10).fill('req.host') }, ok: true },
    { reason: 'rate-limit bucket_key of eleven entries', over: { bucket_key: Array(11).fill('req.host') }, ok: false, at: 'bucket_key' },
    { reason: 'rate-limit bucket_key of each form SPEC names', over: { bucket_key: ['req.host', 'conn.client_ip', "req.headers['x-api-key']", "getReqHeader('X-Api-Key')"] }, ok: true },
    { reason: 'rate-limit algorithm other than sliding_window', over: { algorithm: 'fixed_window' }, ok: false, at: 'algorithm' },
  ])('$reason: ok=$ok', async ({ over, ok, at }) => {
    const r = await s.put(`/edges/https/${edge}/routes/${route}/traffic_policy`, { enabled: true, value: policy(over) });
    if (ok) expect(r.status, r.text).toBe(200);
    else expect(expectInvalid(r, 'value').details.policy_path).toBe(`${AT}.${at}`);
  });

  it.each(['on_http_request', 'on_http_response'])('rate-limit runs in %s (SPEC\'s phases)', async (phase) => {
    expect((await s.put(`/edges/https/${edge}/routes/${route}/traffic_policy`, { value: policy({}, phase) })).status).toBe(200);
  });

  it.each([
    { reason: 'weighted backend weight 0', path: '/backends/weighted', body: () => ({ backends: { [child]: 0 } }), ok: true },
    { reason: 'weighted backend weight 10000', path: '/backends/weighted', body: () => ({ backends: { [child]: 10000 } }), ok: true },
    { reason: 'weighted backend weight 10001', path: '/backends/weighted', body: () => ({ backends: { [child]: 10001 } }), ok: false, field: 'backends.CHILD' },
    { reason: 'weighted backend weight -1', path: '/backends/weighted', body: () => ({ backends: { [child]: -1 } }), ok: false, field: 'backends.CHILD' },
    { reason: 'RSA SSH CA key_size 2048', path: '/ssh_certificate_authorities', body: () => ({ private_key_type: 'rsa', key_size: 2048 }), ok: true },
    { reason: 'RSA SSH CA key_size 4096', path: '/ssh_certificate_authorities', body: () => ({ private_key_type: 'rsa', key_size: 4096 }), ok: true },
    { reason: 'RSA SSH CA key_size 3072', path: '/ssh_certificate_authorities', body: () => ({ private_key_type: 'rsa', key_size: 3072 }), ok: false, field: 'key_size' },
  ])('$reason: ok=$ok', async ({ path: at, body, ok, field }) => {
    const r = await s.post(at, body());
    if (ok) expect(r.status, r.text).toBe(201);
    else expectInvalid(r, field!.replace('CHILD', child));
  });

  it.each([
    { reason: 'circuit breaker num_buckets 128', body: { num_buckets: 128 }, ok: true },
    { reason: 'circuit breaker num_buckets 129', body: { num_buckets: 129 }, ok: false, field: 'num_buckets' },
    { reason: 'circuit breaker error_threshold_percentage 0', body: { error_threshold_percentage: 0 }, ok: true },
    { reason: 'circuit breaker error_threshold_percentage 1.0', body: { error_threshold_percentage: 1.0 }, ok: true },
    { reason: 'circuit breaker error_threshold_percentage 1.01', body: { error_threshold_percentage: 1.01 }, ok: false, field: 'error_threshold_percentage' },
  ])('$reason: ok=$ok', async ({ body, ok, field }) => {
    const r = await s.put(`/edges/https/${edge}/routes/${route}/circuit_breaker`, body);
    if (ok) expect(r.status, r.text).toBe(200);
    else expectInvalid(r, field!);
  });
});

describe('every error naming a field also gives the reason (DECISIONS, error body)', () => {
  const cases: { reason: string; send: () => Promise<import('../helpers/server.js').Reply>; status: number; field: string }[] = [
    { reason: 'an unknown query parameter', send: () => s.get('/ip_policies?colour=red'), status: 400, field: 'colour' },
    { reason: 'a limit out of range', send: () => s.get('/ip_policies?limit=0'), status: 400, field: 'limit' },
    { reason: 'a path id of another collection', send: () => s.get(`/ip_policies/${unknownId('ipr')}`), status: 400, field: 'id' },
    { reason: 'a reference to nothing', send: () => s.post('/ip_policy_rules', { ip_policy_id: unknownId('ipp'), cidr: '10.0.0.0/8', action: 'allow' }), status: 400, field: 'ip_policy_id' },
    { reason: 'a body id that differs from the path', send: async () => s.patch(`/ip_policies/${(await s.post('/ip_policies', {})).body.id}`, { id: unknownId('ipp') }), status: 400, field: 'id' },
    { reason: 'a field that cannot change', send: async () => s.patch(`/api_keys/${(await s.post('/api_keys', {})).body.id}`, { owner_id: unknownId('usr') }), status: 400, field: 'owner_id' },
    {
      reason: 'a non-admin naming another owner',
      send: async () => {
        const bot = (await s.post('/bot_users', { name: 'not-admin' })).body;
        const key = (await s.post('/api_keys', { owner_id: bot.id })).body;
        return s.post('/api_keys', { owner_id: s.server.bootstrap.userId }, { token: key.token });
      },
      status: 403,
      field: 'owner_id',
    },
    {
      reason: 'a uniqueness conflict',
      send: async () => {
        const p = (await s.post('/ip_policies', {})).body;
        await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.9.0.0/16', action: 'allow' });
        return s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.9.0.0/16', action: 'deny' });
      },
      status: 409,
      field: 'cidr',
    },
  ];
  it.each(cases)('$reason: $status with details.field $field and details.reason', async ({ send, status, field }) => {
    const body = expectError(await send(), status);
    expect(body.details.field).toBe(field);
    expect(typeof body.details.reason).toBe('string');
    expect((body.details.reason as string).length).toBeGreaterThan(0);
    expect(body.msg).toContain(body.details.reason as string);
  });
});

describe('a request with no body is not judged on a content type it names (DECISIONS, content type)', () => {
  it.each([
    { reason: 'DELETE naming text/plain', method: 'DELETE', contentType: 'text/plain', status: 204 },
    { reason: 'DELETE naming a form', method: 'DELETE', contentType: 'application/x-www-form-urlencoded', status: 204 },
    { reason: 'POST naming a form (curl -d \'\')', method: 'POST', contentType: 'application/x-www-form-urlencoded', status: 201 },
    { reason: 'PATCH naming text/plain', method: 'PATCH', contentType: 'text/plain', status: 200 },
  ])('$reason: $status', async ({ method, contentType, status }) => {
    const p = (await s.post('/ip_policies', {})).body;
    const at = method === 'POST' ? '/ip_policies' : `/ip_policies/${p.id}`;
    expect((await s.request(method, at, undefined, { raw: '', contentType })).status).toBe(status);
  });

  it('a body that is there must still be JSON', async () => {
    const p = (await s.post('/ip_policies', {})).body;
    expectError(await s.request('DELETE', `/ip_policies/${p.id}`, undefined, { raw: 'x', contentType: 'text/plain' }), 400, 'ERR_SERVICE_101');
    expectError(await s.request('POST', '/ip_policies', undefined, { raw: 'a=1', contentType: 'application/x-www-form-urlencoded' }), 400, 'ERR_SERVICE_101');
  });
});

describe('the OpenAPI document describes agent commands as SPEC does', () => {
  it.each(['restart', 'stop', 'update'])('%s: an optional JSON object as the body, 204 with no body', async (action) => {
    const doc = (await s.get('/openapi.json', { token: null, version: null })).body;
    const op = doc.paths[`/tunnel_sessions/{id}/${action}`].post;
    expect(op.requestBody).toMatchObject({ required: false, content: { 'application/json': { schema: { type: 'object' } } } });
    expect(op.responses['204']).toBeDefined();
  });
});
