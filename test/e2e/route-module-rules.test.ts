// Every rule of the route modules, each violated once, three ways: inline on route create,
// through the module's own PUT, and inline on PATCH. Each answer is a 400 naming the field
// (relative to the module for PUT, whose body is the module), and nothing is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorCode } from '../../server/http/errors.js';
import { expectError, expectInvalid, unknownId } from '../helpers/api.js';
import { freshHostport, IDP_METADATA } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let edgeId: string;
beforeAll(async () => {
  s = await startTestServer();
  edgeId = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id;
});
afterAll(async () => { await s.close(); });

interface Case { module: string; reason: string; body: Record<string, unknown>; field: string; code?: ErrorCode; policyPath?: string; says?: RegExp }

const rateLimit = (config: Record<string, unknown>, phase = 'on_http_request') =>
  JSON.stringify({ [phase]: [{ actions: [{ type: 'rate-limit', config: { name: 'n', algorithm: 'sliding_window', capacity: 10, rate: '60s', bucket_key: ['req.host'], ...config } }] }] });

const cases: Case[] = [
  { module: 'backend', reason: 'backend_id missing', body: {}, field: 'backend_id', says: /required/ },
  { module: 'backend', reason: 'backend_id of another kind (an IP policy id)', body: { backend_id: unknownId('ipp') }, field: 'backend_id', says: /not an id of/ },
  { module: 'backend', reason: 'a backend that does not exist', body: { backend_id: unknownId('bkdtg') }, field: 'backend_id', code: 'ERR_SERVICE_107', says: /does not exist/ },
  { module: 'backend', reason: 'enabled not a boolean', body: { enabled: 'yes', backend_id: unknownId('bkdtg') }, field: 'enabled' },
  { module: 'backend', reason: 'an unknown field', body: { backend: 'x' }, field: 'backend', code: 'ERR_SERVICE_102' },
  { module: 'ip_restriction', reason: 'an IP policy that does not exist', body: { ip_policy_ids: [unknownId('ipp')] }, field: 'ip_policy_ids', code: 'ERR_SERVICE_107' },
  { module: 'ip_restriction', reason: 'an id of another kind', body: { ip_policy_ids: [unknownId('bkdtg')] }, field: 'ip_policy_ids[0]' },
  { module: 'ip_restriction', reason: 'ip_policy_ids not a list', body: { ip_policy_ids: unknownId('ipp') }, field: 'ip_policy_ids' },
  { module: 'circuit_breaker', reason: 'num_buckets over 128', body: { num_buckets: 129 }, field: 'num_buckets', says: /128/ },
  { module: 'circuit_breaker', reason: 'error_threshold_percentage over 1.0', body: { error_threshold_percentage: 1.01 }, field: 'error_threshold_percentage', says: /0 to 1\.0/ },
  { module: 'circuit_breaker', reason: 'error_threshold_percentage as a percentage', body: { error_threshold_percentage: 50 }, field: 'error_threshold_percentage', says: /not a percentage/ },
  { module: 'circuit_breaker', reason: 'error_threshold_percentage negative', body: { error_threshold_percentage: -0.1 }, field: 'error_threshold_percentage' },
  { module: 'circuit_breaker', reason: 'tripped_duration negative', body: { tripped_duration: -1 }, field: 'tripped_duration' },
  { module: 'circuit_breaker', reason: 'rolling_window not an integer', body: { rolling_window: 1.5 }, field: 'rolling_window' },
  { module: 'circuit_breaker', reason: 'volume_threshold beyond uint32', body: { volume_threshold: 2 ** 32 }, field: 'volume_threshold' },
  { module: 'compression', reason: 'an unknown field', body: { level: 9 }, field: 'level', code: 'ERR_SERVICE_102' },
  { module: 'request_headers', reason: 'a header name with a space', body: { add: { 'bad name': 'v' } }, field: 'add.bad name', says: /header name/ },
  { module: 'request_headers', reason: 'a header value with CR LF', body: { add: { 'x-a': 'v\r\nx-b: injected' } }, field: 'add.x-a', says: /CR or LF/ },
  { module: 'request_headers', reason: 'one header given twice in different case', body: { add: { 'X-A': '1', 'x-a': '2' } }, field: 'add.x-a', says: /case-insensitive/ },
  { module: 'request_headers', reason: 'a removed name that is not a header name', body: { remove: ['x:y'] }, field: 'remove[0]' },
  { module: 'response_headers', reason: 'an empty header name', body: { add: { '': 'v' } }, field: 'add.', says: /header name/ },
  { module: 'response_headers', reason: 'a header value with NUL', body: { add: { 'x-a': 'a\u0000b' } }, field: 'add.x-a' },
  { module: 'response_headers', reason: 'remove not a list', body: { remove: 'server' }, field: 'remove' },
  { module: 'webhook_verification', reason: 'an unknown provider', body: { provider: 'myhooks', secret: 's' }, field: 'provider', says: /unknown webhook provider/ },
  { module: 'webhook_verification', reason: 'provider missing', body: { secret: 's' }, field: 'provider' },
  { module: 'webhook_verification', reason: 'no secret for a provider that signs with one', body: { provider: 'GitHub' }, field: 'secret', says: /required for provider GitHub/ },
  { module: 'webhook_verification', reason: 'an empty secret', body: { provider: 'stripe', secret: '' }, field: 'secret' },
  { module: 'oauth', reason: 'provider missing', body: {}, field: 'provider' },
  { module: 'oauth', reason: 'no identity provider set', body: { provider: {} }, field: 'provider', says: /exactly one/ },
  { module: 'oauth', reason: 'two identity providers', body: { provider: { github: {}, google: {} } }, field: 'provider', says: /exactly one.*github, google/ },
  { module: 'oauth', reason: 'an identity provider set to null only', body: { provider: { github: null } }, field: 'provider', says: /got none/ },
  { module: 'oauth', reason: 'an unknown identity provider', body: { provider: { okta: {} } }, field: 'provider.okta', code: 'ERR_SERVICE_102' },
  { module: 'oauth', reason: 'client_id without client_secret', body: { provider: { github: { client_id: 'id' } } }, field: 'provider.github.client_secret', says: /client_secret is required/ },
  { module: 'oauth', reason: 'client_secret without client_id', body: { provider: { google: { client_secret: 's' } } }, field: 'provider.google.client_id' },
  { module: 'oauth', reason: 'scopes without client credentials', body: { provider: { microsoft: { scopes: ['User.Read'] } } }, field: 'provider.microsoft.scopes', says: /only with both client_id and client_secret/ },
  { module: 'oauth', reason: 'teams on a provider other than github', body: { provider: { google: { teams: ['a/b'] } } }, field: 'provider.google.teams', code: 'ERR_SERVICE_102' },
  { module: 'oauth', reason: 'organizations on gitlab', body: { provider: { gitlab: { organizations: ['acme'] } } }, field: 'provider.gitlab.organizations', code: 'ERR_SERVICE_102' },
  { module: 'oauth', reason: 'a team not written <org>/<team>', body: { provider: { github: { teams: ['ops'] } } }, field: 'provider.github.teams[0]', says: /<org>\/<team>/ },
  { module: 'oauth', reason: 'a cookie_prefix with a dash', body: { provider: { github: {} }, cookie_prefix: 'my-app' }, field: 'cookie_prefix', says: /letters, digits and periods/ },
  { module: 'oauth', reason: 'a negative auth_check_interval', body: { provider: { github: {} }, auth_check_interval: -5 }, field: 'auth_check_interval' },
  { module: 'saml', reason: 'idp_metadata missing', body: {}, field: 'idp_metadata' },
  { module: 'saml', reason: 'idp_metadata that is not XML', body: { idp_metadata: 'https://idp.example.com/metadata' }, field: 'idp_metadata', says: /EntityDescriptor/ },
  { module: 'saml', reason: 'idp_metadata with another root element', body: { idp_metadata: '<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/>' }, field: 'idp_metadata', says: /root element/ },
  { module: 'saml', reason: 'idp_metadata with an unclosed element', body: { idp_metadata: '<EntityDescriptor><IDPSSODescriptor></EntityDescriptor>' }, field: 'idp_metadata' },
  { module: 'saml', reason: 'a short name that is not a supported format', body: { idp_metadata: IDP_METADATA, nameid_format: 'kerberos' }, field: 'nameid_format', says: /persistent, transient, emailAddress or unspecified/ },
  { module: 'saml', reason: 'a format in another case (URNs are case-sensitive)', body: { idp_metadata: IDP_METADATA, nameid_format: 'Transient' }, field: 'nameid_format' },
  { module: 'oidc', reason: 'maximum_duration one over the uint32 maximum', body: { issuer: 'https://id.example.com', client_id: 'c', client_secret: 's', maximum_duration: 4294967296 }, field: 'maximum_duration' },
  { module: 'saml', reason: 'an unsupported nameid_format', body: { idp_metadata: IDP_METADATA, nameid_format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:kerberos' }, field: 'nameid_format' },
  { module: 'saml', reason: 'a computed field on input', body: { idp_metadata: IDP_METADATA, entity_id: 'https://sp.example.com' }, field: 'entity_id', says: /set by the server/ },
  { module: 'oidc', reason: 'issuer missing', body: { client_id: 'c', client_secret: 's' }, field: 'issuer' },
  { module: 'oidc', reason: 'an issuer that is not a URL', body: { issuer: 'accounts', client_id: 'c', client_secret: 's' }, field: 'issuer' },
  { module: 'oidc', reason: 'client_id missing', body: { issuer: 'https://id.example.com', client_secret: 's' }, field: 'client_id' },
  { module: 'oidc', reason: 'client_secret missing', body: { issuer: 'https://id.example.com', client_id: 'c' }, field: 'client_secret' },
  { module: 'oidc', reason: 'inactivity_timeout not a number', body: { issuer: 'https://id.example.com', client_id: 'c', client_secret: 's', inactivity_timeout: '1h' }, field: 'inactivity_timeout' },
  { module: 'websocket_tcp_converter', reason: 'enabled not a boolean', body: { enabled: 1 }, field: 'enabled' },
  { module: 'user_agent_filter', reason: 'an allow pattern that does not compile', body: { allow: ['curl/(7'] }, field: 'allow[0]', says: /regular expression/ },
  { module: 'user_agent_filter', reason: 'a deny pattern with an open class', body: { deny: ['ok', '[a-'] }, field: 'deny[1]' },
  { module: 'user_agent_filter', reason: 'a lookahead (not RE2)', body: { deny: ['(?=bot)'] }, field: 'deny[0]', says: /lookahead/ },
  { module: 'user_agent_filter', reason: 'a backreference (not RE2)', body: { allow: ['(a)\\1'] }, field: 'allow[0]', says: /backreference/ },
  { module: 'traffic_policy', reason: 'value missing', body: {}, field: 'value' },
  { module: 'traffic_policy', reason: 'value that is neither YAML nor JSON', body: { value: 'on_http_request: [' }, field: 'value', policyPath: '', says: /not valid YAML/ },
  { module: 'traffic_policy', reason: 'an unknown phase', body: { value: 'on_request: []' }, field: 'value', policyPath: 'on_request', says: /unknown phase/ },
  { module: 'traffic_policy', reason: 'a phase that is not a list', body: { value: 'on_http_request: {}' }, field: 'value', policyPath: 'on_http_request' },
  { module: 'traffic_policy', reason: 'a rule without actions', body: { value: 'on_http_request:\n  - name: r\n' }, field: 'value', policyPath: 'on_http_request[0].actions' },
  { module: 'traffic_policy', reason: 'rate-limit capacity 0 (JSON)', body: { value: rateLimit({ capacity: 0 }) }, field: 'value', policyPath: 'on_http_request[0].actions[0].config.capacity', says: /capacity 0 is out of range 1\.\.2,000,000,000/ },
  { module: 'traffic_policy', reason: 'rate-limit rate not a multiple of 10 s', body: { value: rateLimit({ rate: '65s' }) }, field: 'value', policyPath: 'on_http_request[0].actions[0].config.rate', says: /multiple of 10s/ },
  { module: 'traffic_policy', reason: 'rate-limit algorithm other than sliding_window', body: { value: rateLimit({ algorithm: 'token_bucket' }) }, field: 'value', policyPath: 'on_http_request[0].actions[0].config.algorithm' },
  { module: 'traffic_policy', reason: 'rate-limit bucket_key entry of an unknown form', body: { value: rateLimit({ bucket_key: ['req.host', 'req.path'] }) }, field: 'value', policyPath: 'on_http_request[0].actions[0].config.bucket_key[1]' },
];

const route = (body: Record<string, unknown> = {}) => s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: `/${Math.random()}`, ...body });

describe.each(cases.map((c) => [`${c.module}: ${c.reason}`, c] as const))('%s', (_name, c) => {
  const check = (r: Awaited<ReturnType<typeof route>>, field: string) => {
    const body = expectInvalid(r, field, c.code ?? 'ERR_SERVICE_103');
    if (c.says) expect(body.details.reason ?? body.msg).toMatch(c.says);
    if (c.policyPath !== undefined) {
      expect(body.details.policy_path).toBe(c.policyPath);
      if (c.policyPath) expect(body.msg).toContain(c.policyPath);
    }
    return body;
  };

  it('inline on create: 400, no route', async () => {
    const before = (await s.get(`/edges/https/${edgeId}`)).body.routes.length;
    check(await route({ [c.module]: c.body }), `${c.module}.${c.field}`);
    expect((await s.get(`/edges/https/${edgeId}`)).body.routes.length).toBe(before);
  });

  it('module PUT: 400 naming the field inside the module; route unchanged', async () => {
    const existing = (await route({ description: 'before' })).body;
    check(await s.put(`/edges/https/${edgeId}/routes/${existing.id}/${c.module}`, c.body), c.field);
    expect((await s.get(`/edges/https/${edgeId}/routes/${existing.id}`)).body).toEqual(existing);
  });

  it('inline on PATCH: 400; route unchanged', async () => {
    const existing = (await route({ description: 'before' })).body;
    check(await s.patch(`/edges/https/${edgeId}/routes/${existing.id}`, { description: 'after', [c.module]: c.body }), `${c.module}.${c.field}`);
    expect((await s.get(`/edges/https/${edgeId}/routes/${existing.id}`)).body).toEqual(existing);
  });
});

describe('at most one of oauth, oidc, saml per route', () => {
  const auth = {
    oauth: { provider: { github: {} } },
    oidc: { issuer: 'https://id.example.com', client_id: 'c', client_secret: 's' },
    saml: { idp_metadata: IDP_METADATA },
  };
  const pairs = [['oauth', 'oidc'], ['oauth', 'saml'], ['oidc', 'saml']] as const;

  it.each(pairs)('%s and %s together on create: 400', async (a, b) => {
    const body = expectInvalid(await route({ [a]: auth[a], [b]: auth[b] }), b);
    expect(body.msg).toMatch(/at most one of oauth, oidc, saml/);
  });

  it.each(pairs)('a route with %s refuses a PUT of %s, and takes it after the DELETE', async (a, b) => {
    const r = (await route({ [a]: auth[a] })).body;
    expectInvalid(await s.put(`/edges/https/${edgeId}/routes/${r.id}/${b}`, auth[b]), b);
    expectInvalid(await s.patch(`/edges/https/${edgeId}/routes/${r.id}`, { [b]: auth[b] }), b);
    expect((await s.del(`/edges/https/${edgeId}/routes/${r.id}/${a}`)).status).toBe(204);
    expect((await s.put(`/edges/https/${edgeId}/routes/${r.id}/${b}`, auth[b])).status).toBe(200);
  });
});

describe('values at the limits are accepted', () => {
  it.each([
    { reason: 'num_buckets 128 and error_threshold_percentage 0 and 1', module: 'circuit_breaker', body: { num_buckets: 128, error_threshold_percentage: 1 }, also: { error_threshold_percentage: 0 } },
    // SPEC types these uint32 and bounds only num_buckets (max 128): the type's own ends are in range.
    { reason: 'num_buckets 0 (uint32, SPEC sets only a maximum) and every count at the uint32 maximum', module: 'circuit_breaker', body: { num_buckets: 0, tripped_duration: 4294967295, rolling_window: 4294967295, volume_threshold: 4294967295 }, also: { num_buckets: 0, tripped_duration: 0, rolling_window: 0, volume_threshold: 0 } },
    { reason: 'session durations and auth_check_interval at the uint32 maximum', module: 'oauth', body: { provider: { github: {} }, inactivity_timeout: 4294967295, maximum_duration: 4294967295, auth_check_interval: 4294967295 }, also: { provider: { gitlab: {} }, auth_check_interval: 0 } },
    // DECISIONS names the formats by short name; SAML 2.0 lists emailAddress and unspecified among its formats.
    { reason: 'nameid_format by the short names DECISIONS uses', module: 'saml', body: { idp_metadata: IDP_METADATA, nameid_format: 'transient' }, also: { idp_metadata: IDP_METADATA, nameid_format: 'emailAddress' } },
    { reason: 'nameid_format persistent and unspecified by short name', module: 'saml', body: { idp_metadata: IDP_METADATA, nameid_format: 'persistent' }, also: { idp_metadata: IDP_METADATA, nameid_format: 'unspecified' } },
    { reason: 'nameid_format emailAddress under the SAML 1.1 and 2.0 namespaces', module: 'saml', body: { idp_metadata: IDP_METADATA, nameid_format: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress' }, also: { idp_metadata: IDP_METADATA, nameid_format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:emailAddress' } },
    { reason: 'nameid_format unspecified under the SAML 1.1 and 2.0 namespaces', module: 'saml', body: { idp_metadata: IDP_METADATA, nameid_format: 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified' }, also: { idp_metadata: IDP_METADATA, nameid_format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:unspecified' } },
    { reason: 'the sns provider without a secret, in any case', module: 'webhook_verification', body: { provider: 'SNS' }, also: { provider: 'sns' } },
    { reason: 'webhook providers matched case-insensitively and echoed as given', module: 'webhook_verification', body: { provider: 'GitHub', secret: 's' }, also: { provider: 'SLACK', secret: 's' } },
    { reason: 'client_id, client_secret and scopes together on every provider', module: 'oauth', body: { provider: { amazon: { client_id: 'i', client_secret: 's', scopes: ['profile'] } } }, also: { provider: { twitch: { client_id: 'i', client_secret: 's', scopes: ['user:read:email'] } } } },
    { reason: 'RE2 flags and named groups', module: 'user_agent_filter', body: { allow: ['(?i)^Mozilla', '(?P<v>\\d+)'] }, also: { deny: ['(?is)bot.*'] } },
    { reason: 'header names with every token character', module: 'request_headers', body: { add: { "x-!#$%&'*+.^_`|~": 'v' } }, also: { remove: ['x-1'] } },
  ])('$module: $reason', async ({ module, body, also }) => {
    const r = (await route({ [module]: body })).body;
    // Write-only secrets read back as null; OAuth's provider reads back with all eight members.
    const readOf = (b: Record<string, unknown>) => ('secret' in b ? { ...b, secret: null } : b);
    expect(r[module]).toMatchObject(module === 'oauth' ? { enabled: true } : readOf(body));
    const put = await s.put(`/edges/https/${edgeId}/routes/${r.id}/${module}`, also);
    expect(put.status, put.text).toBe(200);
    if (module === 'oauth') expect(put.body).toMatchObject(Object.fromEntries(Object.entries(also).filter(([k]) => k !== 'provider')));
    else expect(put.body).toMatchObject(readOf(also));
  });

  it('header names are stored and returned in lower case', async () => {
    const r = (await route({ request_headers: { add: { 'X-Forwarded-Proto': 'https' }, remove: ['X-Powered-By'] } })).body;
    expect(r.request_headers).toEqual({ enabled: true, add: { 'x-forwarded-proto': 'https' }, remove: ['x-powered-by'] });
  });

  it('a rate-limit name of 1023 characters, 10 bucket keys, 60s and 24h, capacity 1 and 2e9, YAML and JSON', async () => {
    const yaml = `on_http_request:\n  - actions:\n      - type: rate-limit\n        config:\n          name: ${'n'.repeat(1023)}\n          algorithm: sliding_window\n          capacity: 2000000000\n          rate: 24h\n          bucket_key: [req.host, conn.client_ip, "req.headers['a']", "getReqHeader('B')", "req.headers['c']", "req.headers['d']", "req.headers['e']", "req.headers['f']", "req.headers['g']", "req.headers['h']"]\n`;
    expect((await route({ traffic_policy: { value: yaml } })).status).toBe(201);
    expect((await route({ traffic_policy: { value: rateLimit({ capacity: 1, rate: '1m' }, 'on_http_response') } })).status).toBe(201);
    const tooLong = await route({ traffic_policy: { value: rateLimit({ name: 'n'.repeat(1024) }) } });
    expect(expectError(tooLong, 400).details.policy_path).toBe('on_http_request[0].actions[0].config.name');
  });
});
