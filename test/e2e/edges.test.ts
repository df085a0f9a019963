// HTTPS, TCP and TLS edges end to end: CRUD with their list envelopes, hostports (format,
// uniqueness across every kind of edge), their modules inline and through PUT/GET/DELETE
// (walked from the catalog), TLS termination rules, and references to backends, IP
// policies and certificate authorities.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kindOf } from '../../provider/catalog/index.js';
import { expectError, expectInvalid, ID, RFC3339, unknownId } from '../helpers/api.js';
import { caPem, createRefs, freshHostport, HTTP_POLICY, moduleSamples, TCP_POLICY, type Refs } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;
let s: TestServer;
let refs: Refs;
beforeAll(async () => {
  s = await startTestServer();
  refs = await createRefs(s);
});
afterAll(async () => { await s.close(); });

const EDGES = [
  { kind: kindOf('HTTPSEdge'), path: '/edges/https', envelope: 'https_edges', prefix: 'edghts', extra: { routes: [] } },
  { kind: kindOf('TCPEdge'), path: '/edges/tcp', envelope: 'tcp_edges', prefix: 'edgtcp', extra: {} },
  { kind: kindOf('TLSEdge'), path: '/edges/tls', envelope: 'tls_edges', prefix: 'edgtls', extra: {} },
];

const create = async (path: string, body: Doc) => {
  const r = await s.post(path, body);
  expect(r.status, r.text).toBe(201);
  return r.body as Doc;
};

describe.each(EDGES.map((e) => [e.kind.kind, e] as const))('%s', (_name, { kind, path, envelope, prefix, extra }) => {
  const modules = Object.keys(kind.modules);
  const noModules = Object.fromEntries(modules.map((m) => [m, null]));

  it('full CRUD: modules null and hostports as given on create, the list envelope, PATCH, delete', async () => {
    const hp = [freshHostport(), freshHostport()];
    const created = await s.post(path, { description: 'edge', metadata: 'meta', hostports: hp });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(id).toMatch(ID);
    expect(id.startsWith(`${prefix}_`)).toBe(true);
    expect(created.body).toEqual({ id, uri: `${s.url}${path}/${id}`, created_at: expect.stringMatching(RFC3339), description: 'edge', metadata: 'meta', hostports: hp, ...noModules, ...extra });
    expect((await s.get(`${path}/${id}`)).body).toEqual(created.body);
    const list = await s.get(path);
    expect(Object.keys(list.body).sort()).toEqual([envelope, 'next_page_uri', 'uri'].sort());
    expect(list.body.uri).toBe(`${s.url}${path}`);
    expect(list.body[envelope][0]).toEqual(created.body);
    expect(list.body[envelope].every((e: Doc) => e.id.startsWith(`${prefix}_`))).toBe(true);
    const moved = [freshHostport()];
    const patched = await s.patch(`${path}/${id}`, { hostports: moved, description: '' });
    expect(patched.body).toEqual({ ...created.body, hostports: moved, description: '' });
    expect((await s.patch(`${path}/${id}`, {})).body).toEqual(patched.body);
    expect((await s.del(`${path}/${id}`)).status).toBe(204);
    expectError(await s.get(`${path}/${id}`), 404, 'ERR_SERVICE_300');
    expectError(await s.del(`${path}/${id}`), 404, 'ERR_SERVICE_300');
    // The hostports are free again.
    await create(path, { hostports: [...hp, ...moved] });
  });

  it('an edge with no hostports is allowed (hostports: [])', async () => {
    expect((await create(path, {})).hostports).toEqual([]);
  });

  it('every module of the catalog has samples', () => {
    expect(Object.keys(moduleSamples(kind, refs, s.url)).sort()).toEqual([...modules].sort());
  });

  describe.each(modules)('module %s', (name) => {
    const sample = () => moduleSamples(kind, refs, s.url)[name];

    it('inline on create and PATCH, read back as written; PATCH without it leaves it', async () => {
      const edge = await create(path, { hostports: [freshHostport()], [name]: sample().full.input });
      expect(edge).toEqual({ ...edge, ...noModules, [name]: sample().full.read });
      expect((await s.get(`${path}/${edge.id}`)).body).toEqual(edge);
      const patched = await s.patch(`${path}/${edge.id}`, { [name]: sample().minimal.input });
      expect(patched.body[name]).toEqual(sample().minimal.read);
      const untouched = await s.patch(`${path}/${edge.id}`, { description: 'd', [name]: null });
      expect(untouched.body).toEqual({ ...patched.body, description: 'd' });
    });

    it('PUT, GET, PUT again (replaces whole), {module} wrapper, DELETE', async () => {
      const edge = await create(path, { hostports: [freshHostport()] });
      const at = `${path}/${edge.id}/${name}`;
      expectError(await s.get(at), 404, 'ERR_SERVICE_302');
      expectError(await s.del(at), 404, 'ERR_SERVICE_302');
      const put = await s.put(at, sample().full.input);
      expect(put.status, put.text).toBe(200);
      expect(put.body).toEqual(sample().full.read);
      expect((await s.get(at)).body).toEqual(put.body);
      expect((await s.get(`${path}/${edge.id}`)).body).toEqual({ ...edge, [name]: put.body });
      expect((await s.put(at, sample().minimal.input)).body).toEqual(sample().minimal.read);
      expect((await s.put(at, { module: sample().full.input, id: edge.id })).body).toEqual(sample().full.read);
      expectInvalid(await s.put(at, { ...sample().full.input, id: unknownId(prefix) }), 'id', 'ERR_SERVICE_108');
      expect((await s.del(at)).status).toBe(204);
      expectError(await s.get(at), 404, 'ERR_SERVICE_302');
      expect((await s.get(`${path}/${edge.id}`)).body).toEqual(edge);
      expectError(await s.put(`${path}/${unknownId(prefix)}/${name}`, sample().full.input), 404, 'ERR_SERVICE_300');
    });
  });
});

describe('hostports', () => {
  it.each([
    { reason: 'no port', value: 'app.example.com' },
    { reason: 'port 0', value: 'app.example.com:0' },
    { reason: 'port 65536', value: 'app.example.com:65536' },
    { reason: 'a port that is not a number', value: 'app.example.com:https' },
    { reason: 'an empty host', value: ':443' },
    { reason: 'a label starting with a dash', value: '-app.example.com:443' },
    { reason: 'a label over 63 characters', value: `${'a'.repeat(64)}.example.com:443` },
    { reason: 'a scheme', value: 'https://app.example.com:443' },
    { reason: 'a path', value: 'app.example.com:443/x' },
    { reason: 'a wildcard not in the first label', value: 'app.*.example.com:443' },
    { reason: 'an IPv6 address without brackets', value: '2001:db8::1:443' },
    { reason: 'an IPv6 zone, which names an interface of one machine', value: '[fe80::1%eth0]:443' },
  ])('400 for $reason, on each kind of edge, on create and PATCH', async ({ value }) => {
    for (const { path } of EDGES) {
      expectInvalid(await s.post(path, { hostports: [value] }), 'hostports[0]');
      const edge = await create(path, {});
      expectInvalid(await s.patch(`${path}/${edge.id}`, { hostports: [freshHostport(), value] }), 'hostports[1]');
    }
  });

  it('accepts DNS names, wildcards, IPv4 and bracketed IPv6, and stores names in lower case', async () => {
    const tag = freshHostport().split('.')[0];
    const edge = await create('/edges/https', { hostports: [`${tag}.Example.COM:443`, `*.${tag}.example.com:443`, '192.0.2.10:8443', '[2001:db8::10]:443', 'localhost:1', 'x.example.com:65535'] });
    expect(edge.hostports).toEqual([`${tag}.example.com:443`, `*.${tag}.example.com:443`, '192.0.2.10:8443', '[2001:db8::10]:443', 'localhost:1', 'x.example.com:65535']);
  });

  it.each([
    { reason: 'leading zeros in a group', value: '[2001:0db8:0006::0001]:7443' },
    { reason: 'upper-case hex and no :: compression', value: '[2001:DB8:6:0:0:0:0:1]:7443' },
    { reason: 'the shorter of two zero runs compressed', value: '[2001:db8:6::0:0:0:1]:7443' },
    { reason: 'a leading zero in the port', value: '[2001:db8:6::1]:07443' },
  ])('an IPv6 hostport with $reason is stored and read in RFC 5952 form, and its other spellings are 409 or 400', async ({ value }) => {
    const edge = await create('/edges/tls', { hostports: [value] });
    expect(edge.hostports).toEqual(['[2001:db8:6::1]:7443']);
    expect((await s.get(`/edges/tls/${edge.id}`)).body.hostports).toEqual(['[2001:db8:6::1]:7443']);
    // The canonical spelling and another long one are the same hostport: held by this edge.
    for (const other of ['[2001:db8:6::1]:7443', '[2001:0DB8:0006:0000:0000:0000:0000:0001]:7443']) {
      const conflict = expectError(await s.post('/edges/https', { hostports: [other] }), 409, 'ERR_SERVICE_320');
      expect(conflict.details).toMatchObject({ field: 'hostports', value: '[2001:db8:6::1]:7443', conflicting_id: edge.id });
    }
    // Within one edge, two spellings of it are one hostport listed twice.
    expectInvalid(await s.post('/edges/tcp', { hostports: [value, '[2001:db8:6::1]:7443'] }), 'hostports[1]');
    expect((await s.del(`/edges/tls/${edge.id}`)).status).toBe(204);
  });

  it('a hostport listed twice in one edge is 400', async () => {
    const hp = freshHostport();
    expectInvalid(await s.post('/edges/tcp', { hostports: [hp, hp] }), 'hostports[1]');
  });

  it.each(EDGES.flatMap((a) => EDGES.map((b) => [a.kind.kind, b.kind.kind, a.path, b.path])))(
    'a hostport of a %s cannot be served by a %s too (409 naming the holder), in any case, until released',
    async (_a, _b, pathA, pathB) => {
      const hp = freshHostport();
      const holder = await create(pathA, { hostports: [hp] });
      const conflict = expectError(await s.post(pathB, { hostports: [freshHostport(), hp.toUpperCase()] }), 409, 'ERR_SERVICE_320');
      expect(conflict.details).toMatchObject({ field: 'hostports', value: hp, conflicting_id: holder.id });
      expect(conflict.msg).toContain(holder.id);
      const other = await create(pathB, {});
      expectError(await s.patch(`${pathB}/${other.id}`, { hostports: [hp] }), 409, 'ERR_SERVICE_320');
      // An edge may keep its own hostports when PATCHed.
      expect((await s.patch(`${pathA}/${holder.id}`, { hostports: [hp, freshHostport()] })).status).toBe(200);
      await s.patch(`${pathA}/${holder.id}`, { hostports: [] });
      expect((await s.patch(`${pathB}/${other.id}`, { hostports: [hp] })).body.hostports).toEqual([hp]);
    },
  );
});

describe('TLS termination', () => {
  it('HTTPS edges terminate at the edge: terminate_at reads edge and may not be set', async () => {
    const edge = await create('/edges/https', { tls_termination: { min_version: '1.0' } });
    expect(edge.tls_termination).toEqual({ enabled: true, terminate_at: 'edge', min_version: '1.0' });
    expect((await create('/edges/https', { tls_termination: { min_version: null } })).tls_termination.min_version).toBe('1.2');
    for (const terminateAt of ['edge', 'upstream', 'agent']) {
      const body = expectInvalid(await s.post('/edges/https', { tls_termination: { terminate_at: terminateAt } }), 'tls_termination.terminate_at');
      expect(body.msg).toMatch(/terminate/);
      expectInvalid(await s.put(`/edges/https/${edge.id}/tls_termination`, { terminate_at: terminateAt }), 'terminate_at');
    }
  });

  it.each(['/edges/https', '/edges/tls'])('%s: min_version is one of 1.0, 1.1, 1.2, 1.3', async (path) => {
    for (const v of ['1.0', '1.1', '1.2', '1.3']) expect((await create(path, { tls_termination: { min_version: v } })).tls_termination.min_version).toBe(v);
    for (const v of ['1.4', 'TLS1.2', '1', 1.2]) expectInvalid(await s.post(path, { tls_termination: { min_version: v } }), 'tls_termination.min_version');
  });

  it('TLS edges: terminate_at edge, agent or upstream; min_version defaults to 1.2, or null with upstream', async () => {
    expect((await create('/edges/tls', { tls_termination: {} })).tls_termination).toEqual({ enabled: true, terminate_at: 'edge', min_version: '1.2' });
    expect((await create('/edges/tls', { tls_termination: { terminate_at: 'agent' } })).tls_termination).toEqual({ enabled: true, terminate_at: 'agent', min_version: '1.2' });
    expect((await create('/edges/tls', { tls_termination: { terminate_at: 'upstream' } })).tls_termination).toEqual({ enabled: true, terminate_at: 'upstream', min_version: null });
    expect((await create('/edges/tls', { tls_termination: { terminate_at: 'upstream', min_version: null } })).tls_termination.min_version).toBeNull();
    expectInvalid(await s.post('/edges/tls', { tls_termination: { terminate_at: 'client' } }), 'tls_termination.terminate_at');
  });

  it('TLS edges: min_version with upstream is 400, inline, by PUT and by PATCH', async () => {
    const body = expectInvalid(await s.post('/edges/tls', { tls_termination: { terminate_at: 'upstream', min_version: '1.2' } }), 'tls_termination.min_version');
    expect(body.msg).toMatch(/must be null when terminate_at is upstream/);
    const edge = await create('/edges/tls', {});
    expectInvalid(await s.put(`/edges/tls/${edge.id}/tls_termination`, { terminate_at: 'upstream', min_version: '1.3' }), 'min_version');
    expectInvalid(await s.patch(`/edges/tls/${edge.id}`, { tls_termination: { terminate_at: 'upstream', min_version: '1.3' } }), 'tls_termination.min_version');
    expect((await s.get(`/edges/tls/${edge.id}`)).body.tls_termination).toBeNull();
  });

  it.each(['upstream', 'agent'])('TLS edges terminating at %s refuse mutual TLS (400 ERR_SERVICE_120: nothing past the edge checks client certificates), whichever comes first; other modules stay allowed', async (terminateAt) => {
    const passing = { terminate_at: terminateAt };
    const mtls = { certificate_authority_ids: [refs.ca.id] };
    const refused = (r: Parameters<typeof expectInvalid>[0], field = 'mutual_tls') => expect(expectInvalid(r, field, 'ERR_SERVICE_120').msg).toContain(`terminate_at is ${terminateAt}`);
    refused(await s.post('/edges/tls', { tls_termination: passing, mutual_tls: mtls }));
    const withMtls = await create('/edges/tls', { mutual_tls: mtls });
    refused(await s.put(`/edges/tls/${withMtls.id}/tls_termination`, passing));
    refused(await s.patch(`/edges/tls/${withMtls.id}`, { tls_termination: passing }));
    expect((await s.get(`/edges/tls/${withMtls.id}`)).body.tls_termination).toBeNull();
    const passThrough = await create('/edges/tls', { tls_termination: passing });
    refused(await s.put(`/edges/tls/${passThrough.id}/mutual_tls`, mtls));
    refused(await s.patch(`/edges/tls/${passThrough.id}`, { mutual_tls: mtls }));
    expect((await s.get(`/edges/tls/${passThrough.id}`)).body.mutual_tls).toBeNull();
    const full = await create('/edges/tls', {
      tls_termination: passing,
      backend: { backend_id: refs.backend.id },
      ip_restriction: { ip_policy_ids: [refs.policies[0].id] },
      traffic_policy: { value: TCP_POLICY },
    });
    expect(full.mutual_tls).toBeNull();
    expect((await s.put(`/edges/tls/${withMtls.id}/tls_termination`, { terminate_at: 'edge' })).status).toBe(200);
    // Either module disabled claims nothing the edge would not do: a disabled tls_termination terminates at the edge.
    expect((await s.post('/edges/tls', { tls_termination: { ...passing, enabled: false }, mutual_tls: mtls })).status).toBe(201);
    expect((await s.post('/edges/tls', { tls_termination: passing, mutual_tls: { ...mtls, enabled: false } })).status).toBe(201);
  });
});

describe('traffic policies on TCP and TLS edges', () => {
  it.each(['/edges/tcp', '/edges/tls'])('%s takes on_tcp_connect only', async (path) => {
    const body = expectInvalid(await s.post(path, { traffic_policy: { value: HTTP_POLICY } }), 'traffic_policy.value');
    expect(body.details.policy_path).toBe('on_http_request');
    expect(body.msg).toMatch(/on_tcp_connect/);
    expect((await create(path, { traffic_policy: { value: TCP_POLICY } })).traffic_policy.value).toBe(TCP_POLICY);
  });
});

describe('references from edge modules', () => {
  it.each([
    { reason: 'a backend that does not exist', path: '/edges/tcp', body: { backend: { backend_id: unknownId('bkdwd') } }, field: 'backend.backend_id' },
    { reason: 'an IP policy that does not exist', path: '/edges/tls', body: { ip_restriction: { ip_policy_ids: [unknownId('ipp')] } }, field: 'ip_restriction.ip_policy_ids' },
    { reason: 'a CA that does not exist', path: '/edges/https', body: { mutual_tls: { certificate_authority_ids: [unknownId('ca')] } }, field: 'mutual_tls.certificate_authority_ids' },
    { reason: 'a CA that does not exist (TLS edge)', path: '/edges/tls', body: { mutual_tls: { certificate_authority_ids: [unknownId('ca')] } }, field: 'mutual_tls.certificate_authority_ids' },
  ])('400 for $reason; nothing created', async ({ path, body, field }) => {
    const hp = freshHostport();
    const r = expectInvalid(await s.post(path, { hostports: [hp], ...body }), field, 'ERR_SERVICE_107');
    expect(r.details.id).toMatch(/_0{9}Z{18}$/);
    await create(path, { hostports: [hp] });
  });

  it('a CA used by mutual TLS cannot be deleted (409 naming the edges) until released', async () => {
    const ca = await create('/certificate_authorities', { ca_pem: caPem('mTLS CA') });
    const https = await create('/edges/https', { mutual_tls: { certificate_authority_ids: [ca.id] } });
    const tls = await create('/edges/tls', {});
    await s.put(`/edges/tls/${tls.id}/mutual_tls`, { certificate_authority_ids: [ca.id] });
    const body = expectError(await s.del(`/certificate_authorities/${ca.id}`), 409, 'ERR_SERVICE_321');
    expect([...(body.details.referrers as string[])].sort()).toEqual([https.id, tls.id].sort());
    await s.del(`/edges/https/${https.id}/mutual_tls`);
    await s.del(`/edges/tls/${tls.id}`);
    expect((await s.del(`/certificate_authorities/${ca.id}`)).status).toBe(204);
  });

  it('an IP policy deleted while an edge refers to it stays in the read form', async () => {
    const policy = await create('/ip_policies', {});
    const edge = await create('/edges/tcp', { ip_restriction: { ip_policy_ids: [policy.id] } });
    expect((await s.del(`/ip_policies/${policy.id}`)).status).toBe(204);
    expect((await s.get(`/edges/tcp/${edge.id}`)).body.ip_restriction.ip_policies).toEqual([{ id: policy.id, uri: policy.uri }]);
    expect((await s.patch(`/edges/tcp/${edge.id}`, { description: 'still' })).status).toBe(200);
  });
});
