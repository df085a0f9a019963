// IP policies and their rules: CIDR validation, uniqueness per policy, immutable fields,
// cascade on delete, and the description/metadata limits every resource shares.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, RFC3339, unknownId } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

const policy = async (body: object = {}) => (await s.post('/ip_policies', body)).body as { id: string; uri: string };

describe('IP policies', () => {
  it('full CRUD', async () => {
    const created = await s.post('/ip_policies', { description: 'office', metadata: '{"site":"lon"}' });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(created.body).toEqual({ id, uri: `${s.url}/ip_policies/${id}`, created_at: expect.stringMatching(RFC3339), description: 'office', metadata: '{"site":"lon"}' });
    expect((await s.get(`/ip_policies/${id}`)).body).toEqual(created.body);
    expect((await s.get('/ip_policies')).body.ip_policies[0]).toEqual(created.body);
    const patched = await s.patch(`/ip_policies/${id}`, { metadata: '' });
    expect(patched.body).toEqual({ ...created.body, metadata: '' });
    expect((await s.del(`/ip_policies/${id}`)).status).toBe(204);
    expectError(await s.get(`/ip_policies/${id}`), 404, 'ERR_SERVICE_300');
    expectError(await s.del(`/ip_policies/${id}`), 404, 'ERR_SERVICE_300');
    expectError(await s.patch(`/ip_policies/${id}`, {}), 404, 'ERR_SERVICE_300');
  });
});

describe('limits on description and metadata', () => {
  const e = 'é'; // two bytes in UTF-8
  it.each([
    { reason: '255 ASCII bytes', field: 'description', value: 'd'.repeat(255), ok: true },
    { reason: '256 ASCII bytes', field: 'description', value: 'd'.repeat(256), ok: false },
    { reason: '127 two-byte characters (254 bytes)', field: 'description', value: e.repeat(127), ok: true },
    { reason: '128 two-byte characters (256 bytes, though only 128 characters)', field: 'description', value: e.repeat(128), ok: false },
    { reason: '63 four-byte emoji (252 bytes)', field: 'description', value: '😀'.repeat(63), ok: true },
    { reason: '64 four-byte emoji (256 bytes)', field: 'description', value: '😀'.repeat(64), ok: false },
    { reason: '4096 bytes of metadata', field: 'metadata', value: 'm'.repeat(4096), ok: true },
    { reason: '4097 bytes of metadata', field: 'metadata', value: 'm'.repeat(4097), ok: false },
    { reason: '2049 two-byte characters of metadata (4098 bytes)', field: 'metadata', value: e.repeat(2049), ok: false },
  ])('$field of $reason: ok=$ok on create and PATCH, policies and rules alike', async ({ field, value, ok }) => {
    const existing = await policy();
    const rule = await s.post('/ip_policy_rules', { ip_policy_id: existing.id, cidr: '198.51.100.0/24', action: 'deny' });
    const attempts = [
      () => s.post('/ip_policies', { [field]: value }),
      () => s.patch(`/ip_policies/${existing.id}`, { [field]: value }),
      () => s.post('/ip_policy_rules', { ip_policy_id: existing.id, cidr: '192.0.2.0/24', action: 'allow', [field]: value }),
      () => s.patch(`/ip_policy_rules/${rule.body.id}`, { [field]: value }),
    ];
    for (const attempt of attempts) {
      const r = await attempt();
      if (ok) {
        expect(r.status, r.text).toBeLessThan(300);
        expect(r.body[field]).toBe(value);
      } else {
        const body = expectInvalid(r, field);
        expect(body.details.reason).toMatch(field === 'description' ? /255 bytes/ : /4096 bytes/);
      }
    }
  });
});

describe('IP policy rules', () => {
  it('full CRUD', async () => {
    const p = await policy();
    const created = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.0.0.0/8', action: 'allow', description: 'lan' });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(created.body).toEqual({
      id, uri: `${s.url}/ip_policy_rules/${id}`, created_at: expect.stringMatching(RFC3339), description: 'lan', metadata: '', cidr: '10.0.0.0/8', ip_policy: { id: p.id, uri: p.uri }, action: 'allow',
    });
    expect((await s.get(`/ip_policy_rules/${id}`)).body).toEqual(created.body);
    const list = await s.get('/ip_policy_rules');
    expect(Object.keys(list.body).sort()).toEqual(['ip_policy_rules', 'next_page_uri', 'uri']);
    expect(list.body.ip_policy_rules[0]).toEqual(created.body);
    const patched = await s.patch(`/ip_policy_rules/${id}`, { cidr: '10.1.0.0/16', description: 'smaller' });
    expect(patched.body).toEqual({ ...created.body, cidr: '10.1.0.0/16', description: 'smaller' });
    expect((await s.del(`/ip_policy_rules/${id}`)).status).toBe(204);
    expectError(await s.get(`/ip_policy_rules/${id}`), 404);
  });

  it.each([
    { reason: 'an IPv4 network', cidr: '192.168.0.0/16', stored: '192.168.0.0/16' },
    { reason: 'a bare IPv4 address (one host)', cidr: '203.0.113.7', stored: '203.0.113.7/32' },
    { reason: 'the whole IPv4 space', cidr: '0.0.0.0/0', stored: '0.0.0.0/0' },
    { reason: 'an IPv6 network', cidr: '2001:db8::/32', stored: '2001:db8::/32' },
    { reason: 'IPv6 in upper case, canonicalised', cidr: '2001:DB8:0:0::/64', stored: '2001:db8::/64' },
    { reason: 'a bare IPv6 address', cidr: '2001:db8::1', stored: '2001:db8::1/128' },
    { reason: 'the whole IPv6 space', cidr: '::/0', stored: '::/0' },
    { reason: 'IPv4-mapped IPv6', cidr: '::ffff:192.0.2.0/120', stored: '::ffff:c000:200/120' },
  ])('accepts $reason', async ({ cidr, stored }) => {
    const p = await policy();
    const r = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr, action: 'deny' });
    expect(r.status, r.text).toBe(201);
    expect(r.body.cidr).toBe(stored);
  });

  it.each([
    { reason: 'an octet over 255', cidr: '300.0.0.0/8' },
    { reason: 'a prefix over 32 for IPv4', cidr: '10.0.0.0/33' },
    { reason: 'a prefix over 128 for IPv6', cidr: '2001:db8::/129' },
    { reason: 'a negative prefix', cidr: '10.0.0.0/-1' },
    { reason: 'a prefix that is not a number', cidr: '10.0.0.0/eight' },
    { reason: 'two slashes', cidr: '10.0.0.0/8/8' },
    { reason: 'a host name', cidr: 'example.com' },
    { reason: 'an empty string', cidr: '' },
    { reason: 'an IPv6 zone', cidr: 'fe80::1%eth0' },
    { reason: 'a short IPv4 form', cidr: '10/8' },
  ])('refuses $reason', async ({ cidr }) => {
    const p = await policy();
    const body = expectInvalid(await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr, action: 'deny' }), 'cidr');
    expect(body.msg).toMatch(/not a CIDR|prefix length/);
  });

  it.each([
    { cidr: '10.0.0.1/8', network: '10.0.0.0/8' },
    { cidr: '192.168.1.77/24', network: '192.168.1.0/24' },
    { cidr: '2001:db8::1/32', network: '2001:db8::/32' },
    { cidr: '2001:db8:abcd:12::5/48', network: '2001:db8:abcd::/48' },
  ])('refuses $cidr (host bits set) and suggests $network', async ({ cidr, network }) => {
    const p = await policy();
    const body = expectInvalid(await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr, action: 'allow' }), 'cidr');
    expect(body.msg).toContain(`did you mean ${network}?`);
    const fixed = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: network, action: 'allow' });
    expect(fixed.status).toBe(201);
  });

  it('a CIDR appears once per policy (409); another policy may hold it', async () => {
    const p = await policy();
    const first = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '198.51.100.0/24', action: 'allow' });
    for (const cidr of ['198.51.100.0/24', '198.51.100.0/24 ']) {
      const r = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr, action: 'deny' });
      const body = expectError(r, 409, 'ERR_SERVICE_320');
      expect(body.details.field).toBe('cidr');
      expect(body.details.conflicting_id).toBe(first.body.id);
      expect(body.msg).toContain(first.body.id);
    }
    const v6 = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '2001:db8::/48', action: 'allow' });
    expect(v6.status).toBe(201);
    expectError(await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '2001:DB8:0::/48', action: 'allow' }), 409, 'ERR_SERVICE_320');
    const other = await policy();
    expect((await s.post('/ip_policy_rules', { ip_policy_id: other.id, cidr: '198.51.100.0/24', action: 'deny' })).status).toBe(201);
  });

  it('PATCH to a CIDR the policy already has: 409; the freed CIDR can be reused', async () => {
    const p = await policy();
    const a = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.10.0.0/16', action: 'allow' });
    const b = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.20.0.0/16', action: 'allow' });
    expectError(await s.patch(`/ip_policy_rules/${b.body.id}`, { cidr: '10.10.0.0/16' }), 409, 'ERR_SERVICE_320');
    expect((await s.patch(`/ip_policy_rules/${a.body.id}`, { cidr: '10.30.0.0/16' })).status).toBe(200);
    expect((await s.patch(`/ip_policy_rules/${b.body.id}`, { cidr: '10.10.0.0/16' })).status).toBe(200);
    expect((await s.patch(`/ip_policy_rules/${b.body.id}`, { cidr: '10.10.0.0/16' })).status).toBe(200);
  });

  it.each([
    { reason: 'action', change: { action: 'deny' } },
    { reason: 'ip_policy_id', change: { ip_policy_id: 'OTHER' } },
  ])('$reason cannot change: 400', async ({ reason, change }) => {
    const p = await policy();
    const other = await policy();
    const rule = await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.0.0.0/8', action: 'allow' });
    const body = { ...change, ...(reason === 'ip_policy_id' ? { ip_policy_id: other.id } : {}) };
    const r = await s.patch(`/ip_policy_rules/${rule.body.id}`, body);
    const err = expectInvalid(r, reason, 'ERR_SERVICE_106');
    expect(err.msg).toMatch(/cannot be changed/);
    expect((await s.get(`/ip_policy_rules/${rule.body.id}`)).body).toEqual(rule.body);
  });

  it.each([
    { reason: 'no ip_policy_id', body: { cidr: '10.0.0.0/8', action: 'allow' }, field: 'ip_policy_id', code: 'ERR_SERVICE_103' as const },
    { reason: 'no cidr', body: { ip_policy_id: 'POLICY', action: 'allow' }, field: 'cidr', code: 'ERR_SERVICE_103' as const },
    { reason: 'no action', body: { ip_policy_id: 'POLICY', cidr: '10.0.0.0/8' }, field: 'action', code: 'ERR_SERVICE_103' as const },
    { reason: 'an action other than allow or deny', body: { ip_policy_id: 'POLICY', cidr: '10.0.0.0/8', action: 'block' }, field: 'action', code: 'ERR_SERVICE_103' as const },
    { reason: 'a policy that does not exist', body: { ip_policy_id: unknownId('ipp'), cidr: '10.0.0.0/8', action: 'allow' }, field: 'ip_policy_id', code: 'ERR_SERVICE_107' as const },
    { reason: 'an ip_policy_id of another kind', body: { ip_policy_id: unknownId('ipr'), cidr: '10.0.0.0/8', action: 'allow' }, field: 'ip_policy_id', code: 'ERR_SERVICE_103' as const },
    { reason: 'cidr not a string', body: { ip_policy_id: 'POLICY', cidr: 10, action: 'allow' }, field: 'cidr', code: 'ERR_SERVICE_103' as const },
    { reason: 'an unknown field', body: { ip_policy_id: 'POLICY', cidr: '10.0.0.0/8', action: 'allow', enabled: true }, field: 'enabled', code: 'ERR_SERVICE_102' as const },
  ])('refuses $reason', async ({ body, field, code }) => {
    const p = await policy();
    const withPolicy = JSON.parse(JSON.stringify(body).replace('"POLICY"', JSON.stringify(p.id)));
    expectInvalid(await s.post('/ip_policy_rules', withPolicy), field, code);
  });

  it('deleting a policy deletes its rules', async () => {
    const p = await policy();
    const rules = [];
    for (const cidr of ['10.0.0.0/8', '172.16.0.0/12', 'fd00::/8']) rules.push((await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr, action: 'allow' })).body.id);
    const keep = await policy();
    const kept = await s.post('/ip_policy_rules', { ip_policy_id: keep.id, cidr: '10.0.0.0/8', action: 'allow' });
    expect((await s.del(`/ip_policies/${p.id}`)).status).toBe(204);
    for (const id of rules) expectError(await s.get(`/ip_policy_rules/${id}`), 404);
    const listed = (await s.get('/ip_policy_rules')).body.ip_policy_rules.map((r: { id: string }) => r.id);
    for (const id of rules) expect(listed).not.toContain(id);
    expect((await s.get(`/ip_policy_rules/${kept.body.id}`)).status).toBe(200);
    // The CIDR is free again in a new policy with the same rules.
    const again = await policy();
    expect((await s.post('/ip_policy_rules', { ip_policy_id: again.id, cidr: '10.0.0.0/8', action: 'allow' })).status).toBe(201);
  });
});
