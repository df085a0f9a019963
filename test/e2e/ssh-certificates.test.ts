// SSH certificate authorities and user certificates against the real server. For each CA
// key type and each user key type, ssh-keygen reads the returned certificate (checking its
// signature as it parses) and shows what was asked for, and node:crypto verifies the
// signature again against the CA's public_key as ssh-keygen converts it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, ID, unknownId } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SshTools, verifyCertificate, type UserKeySpec } from '../helpers/ssh.js';

let s: TestServer;
let ssh: SshTools;
beforeAll(async () => {
  s = await startTestServer();
  ssh = new SshTools();
});
afterAll(async () => {
  await s.close();
  ssh.close();
});

/** ssh-keygen -L prints validity without a zone; TZ=UTC makes it RFC 3339 minus the Z. */
const listed = (rfc3339: string) => rfc3339.replace(/Z$/, '');

const CAS = [
  { reason: 'RSA 2048', body: { private_key_type: 'rsa', key_size: 2048 }, read: { key_size: 2048, elliptic_curve: null }, bits: 2048, type: 'RSA', alg: 'rsa-sha2-512', prefix: 'ssh-rsa ' },
  { reason: 'RSA without key_size: 4096', body: { private_key_type: 'rsa' }, read: { key_size: 4096, elliptic_curve: null }, bits: 4096, type: 'RSA', alg: 'rsa-sha2-512', prefix: 'ssh-rsa ' },
  { reason: 'ECDSA without a curve: P-256', body: { private_key_type: 'ecdsa' }, read: { elliptic_curve: 'p256', key_size: null }, bits: 256, type: 'ECDSA', alg: 'ecdsa-sha2-nistp256', prefix: 'ecdsa-sha2-nistp256 ' },
  { reason: 'ECDSA P-384', body: { private_key_type: 'ecdsa', elliptic_curve: 'p384' }, read: { elliptic_curve: 'p384', key_size: null }, bits: 384, type: 'ECDSA', alg: 'ecdsa-sha2-nistp384', prefix: 'ecdsa-sha2-nistp384 ' },
  { reason: 'ECDSA P-521', body: { private_key_type: 'ecdsa', elliptic_curve: 'p521' }, read: { elliptic_curve: 'p521', key_size: null }, bits: 521, type: 'ECDSA', alg: 'ecdsa-sha2-nistp521', prefix: 'ecdsa-sha2-nistp521 ' },
  { reason: 'Ed25519', body: { private_key_type: 'ed25519' }, read: { elliptic_curve: null, key_size: null }, bits: 256, type: 'ED25519', alg: 'ssh-ed25519', prefix: 'ssh-ed25519 ' },
] as const;

const USER_KEYS: { reason: string; spec: UserKeySpec; keyType: string; certType: string }[] = [
  { reason: 'RSA 3072', spec: { type: 'rsa', bits: 3072 }, keyType: 'rsa', certType: 'ssh-rsa-cert-v01@openssh.com' },
  { reason: 'ECDSA P-256', spec: { type: 'ecdsa', bits: 256 }, keyType: 'ecdsa', certType: 'ecdsa-sha2-nistp256-cert-v01@openssh.com' },
  { reason: 'ECDSA P-384', spec: { type: 'ecdsa', bits: 384 }, keyType: 'ecdsa', certType: 'ecdsa-sha2-nistp384-cert-v01@openssh.com' },
  { reason: 'ECDSA P-521', spec: { type: 'ecdsa', bits: 521 }, keyType: 'ecdsa', certType: 'ecdsa-sha2-nistp521-cert-v01@openssh.com' },
  { reason: 'Ed25519', spec: { type: 'ed25519' }, keyType: 'ed25519', certType: 'ssh-ed25519-cert-v01@openssh.com' },
];

describe.each(CAS)('an SSH CA with $reason', (caCase) => {
  let ca: Record<string, any>;
  beforeAll(async () => {
    const r = await s.post('/ssh_certificate_authorities', { ...caCase.body, description: caCase.reason });
    expect(r.status, r.text).toBe(201);
    ca = r.body;
  });

  it('has a generated key: public_key in authorized-keys form that ssh-keygen reads; the private key is never returned', async () => {
    expect(ca.id).toMatch(ID);
    expect(ca.id.startsWith('sshca_')).toBe(true);
    expect(ca).toMatchObject({ private_key_type: caCase.body.private_key_type, key_type: caCase.body.private_key_type, description: caCase.reason, ...caCase.read });
    expect(ca.public_key.startsWith(caCase.prefix)).toBe(true);
    expect(ssh.fingerprint(ca.public_key)).toMatchObject({ bits: caCase.bits, type: caCase.type });
    expect(Object.keys(ca).filter((k) => /private_key(?!_type)/.test(k))).toEqual([]);
    const got = await s.get(`/ssh_certificate_authorities/${ca.id}`);
    expect(got.body).toEqual(ca);
    expect(got.text + JSON.stringify(ca)).not.toMatch(/PRIVATE KEY/);
  });

  it.each(USER_KEYS)('signs a certificate for an $reason user key that ssh-keygen reads as asked', async ({ spec, keyType, certType }) => {
    const publicKey = ssh.userKey(spec);
    const body = {
      ssh_certificate_authority_id: ca.id,
      public_key: publicKey,
      principals: ['alice', 'deploy'],
      critical_options: { 'force-command': '/usr/bin/uptime', 'source-address': '10.0.0.0/8,2001:db8::/32' },
      extensions: { 'permit-pty': '', 'permit-port-forwarding': '', 'permit-agent-forwarding': '' },
      valid_after: '2030-01-02T03:04:05Z',
      valid_until: '2030-01-09T03:04:05+00:00',
      description: 'ops',
    };
    const r = await s.post('/ssh_user_certificates', body);
    expect(r.status, r.text).toBe(201);
    const c = r.body;
    expect(c.id.startsWith('sucrt_')).toBe(true);
    expect(c).toMatchObject({ ...body, valid_until: '2030-01-09T03:04:05Z', key_type: keyType });
    expect(c.certificate.startsWith(`${certType} `)).toBe(true);
    const l = ssh.list(c.certificate);
    expect(l.type).toBe(`${certType} user certificate`);
    expect(l.signingCa).toBe(`${caCase.type} ${ssh.fingerprint(ca.public_key).fingerprint} (using ${caCase.alg})`);
    expect(l.keyId).toBe(`"${c.id}"`);
    expect(l.valid).toBe(`from ${listed(body.valid_after)} to ${listed(c.valid_until)}`);
    expect(l.principals).toEqual(['alice', 'deploy']);
    expect(l.criticalOptions).toEqual(['force-command /usr/bin/uptime', 'source-address 10.0.0.0/8,2001:db8::/32']);
    // Sorted by name, as PROTOCOL.certkeys requires.
    expect(l.extensions).toEqual(['permit-agent-forwarding', 'permit-port-forwarding', 'permit-pty']);
    expect(verifyCertificate(c.certificate, ca.public_key, ssh)).toBe(true);
    expect((await s.get(`/ssh_user_certificates/${c.id}`)).body).toEqual(c);
  });
});

describe('SSH user certificates: defaults, checks and lifecycle', () => {
  let ca: Record<string, any>;
  let otherCa: Record<string, any>;
  let key: string;
  beforeAll(async () => {
    ca = (await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' })).body;
    otherCa = (await s.post('/ssh_certificate_authorities', { private_key_type: 'ecdsa' })).body;
    key = ssh.userKey({ type: 'ed25519' });
  });

  it('the checks really check: a certificate from another CA, or with a flipped bit, does not verify', async () => {
    const c = (await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: key })).body;
    expect(verifyCertificate(c.certificate, ca.public_key, ssh)).toBe(true);
    expect(verifyCertificate(c.certificate, otherCa.public_key, ssh)).toBe(false);
    const [type, b64] = c.certificate.split(' ');
    const blob = Buffer.from(b64, 'base64');
    blob[blob.length - 10] ^= 1;
    const tampered = `${type} ${blob.toString('base64')}`;
    expect(verifyCertificate(tampered, ca.public_key, ssh)).toBe(false);
    expect(() => ssh.list(tampered)).toThrow(/incorrect signature/);
  });

  it('defaults: no principals, permit-pty and permit-user-rc, valid from now for 24 hours', async () => {
    const before = Math.floor(Date.now() / 1000) * 1000;
    const r = await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: key });
    const after = Date.now();
    expect(r.status, r.text).toBe(201);
    const c = r.body;
    expect(c).toMatchObject({ principals: [], critical_options: {}, extensions: { 'permit-pty': '', 'permit-user-rc': '' }, description: '', metadata: '', key_type: 'ed25519' });
    const from = Date.parse(c.valid_after);
    expect(from).toBeGreaterThanOrEqual(before);
    expect(from).toBeLessThanOrEqual(after);
    expect(Date.parse(c.valid_until) - from).toBe(24 * 3600 * 1000);
    const l = ssh.list(c.certificate);
    expect(l.principals).toEqual([]);
    expect(l.criticalOptions).toEqual([]);
    expect(l.extensions).toEqual(['permit-pty', 'permit-user-rc']);
    expect(l.valid).toBe(`from ${listed(c.valid_after)} to ${listed(c.valid_until)}`);
  });

  it('an extension with a value and an empty extension map are signed as given', async () => {
    const withValue = (await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: key, extensions: { 'login@example.com': 'alice' } })).body;
    expect(withValue.extensions).toEqual({ 'login@example.com': 'alice' });
    expect(ssh.list(withValue.certificate).extensions).toEqual([expect.stringMatching(/^login@example\.com UNKNOWN OPTION/)]);
    const none = (await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: key, extensions: {} })).body;
    expect(none.extensions).toEqual({});
    expect(ssh.list(none.certificate).extensions).toEqual([]);
  });

  const refusals: { reason: string; body: () => Record<string, unknown>; field: string; code?: 'ERR_SERVICE_107'; msg: RegExp }[] = [
    { reason: 'an unknown critical option', body: () => ({ critical_options: { 'permit-pty': '' } }), field: 'critical_options.permit-pty', msg: /supported: force-command, source-address/ },
    { reason: 'source-address that is not a CIDR', body: () => ({ critical_options: { 'source-address': '10.0.0.0/8,not-an-ip' } }), field: 'critical_options.source-address', msg: /not-an-ip/ },
    { reason: 'source-address with host bits set', body: () => ({ critical_options: { 'source-address': '10.0.0.1/8' } }), field: 'critical_options.source-address', msg: /did you mean 10\.0\.0\.0\/8/ },
    { reason: 'an empty force-command', body: () => ({ critical_options: { 'force-command': '' } }), field: 'critical_options.force-command', msg: /needs a value/ },
    { reason: 'a flag extension with a value', body: () => ({ extensions: { 'permit-pty': 'yes' } }), field: 'extensions.permit-pty', msg: /empty string/ },
    { reason: 'an extension name with a space', body: () => ({ extensions: { 'permit pty': '' } }), field: 'extensions.permit pty', msg: /printable ASCII without spaces/ },
    { reason: 'valid_until before valid_after', body: () => ({ valid_after: '2030-01-02T00:00:00Z', valid_until: '2030-01-01T00:00:00Z' }), field: 'valid_until', msg: /after valid_after/ },
    { reason: 'valid_until equal to valid_after', body: () => ({ valid_after: '2030-01-02T00:00:00Z', valid_until: '2030-01-02T00:00:00Z' }), field: 'valid_until', msg: /after valid_after/ },
    { reason: 'valid_until in the past (valid_after defaults to now)', body: () => ({ valid_until: '2020-01-01T00:00:00Z' }), field: 'valid_until', msg: /not after valid_after/ },
    { reason: 'valid_after more than a day ahead without valid_until', body: () => ({ valid_after: '2099-01-01T00:00:00Z' }), field: 'valid_until', msg: /defaults to 24 hours after creation/ },
    { reason: 'valid_after before 1970', body: () => ({ valid_after: '1969-12-31T23:59:59Z', valid_until: '2030-01-01T00:00:00Z' }), field: 'valid_after', msg: /1970/ },
    { reason: 'a timestamp that is not RFC 3339', body: () => ({ valid_after: 'tomorrow' }), field: 'valid_after', msg: /RFC 3339/ },
    { reason: 'a public key that is not one', body: () => ({ public_key: 'hello world' }), field: 'public_key', msg: /algorithm/ },
    { reason: 'a public key with broken base64', body: () => ({ public_key: 'ssh-ed25519 AAAA$$$$' }), field: 'public_key', msg: /base64/ },
    { reason: 'a public key whose blob names another type', body: () => ({ public_key: `ssh-rsa ${key.split(' ')[1]}` }), field: 'public_key', msg: /holds a ssh-ed25519 key/ },
    { reason: 'a truncated key blob', body: () => ({ public_key: `ssh-ed25519 ${Buffer.from(key.split(' ')[1], 'base64').subarray(0, 30).toString('base64')}` }), field: 'public_key', msg: /truncated or malformed/ },
    { reason: 'two keys', body: () => ({ public_key: `${key}\n${key}` }), field: 'public_key', msg: /exactly one public key/ },
    { reason: 'a certificate instead of a key', body: () => ({ public_key: 'ssh-ed25519-cert-v01@openssh.com AAAA' }), field: 'public_key', msg: /is an SSH certificate/ },
    { reason: 'a security-key (FIDO) key', body: () => ({ public_key: 'sk-ssh-ed25519@openssh.com AAAA' }), field: 'public_key', msg: /not supported/ },
    { reason: 'an RSA key under 2048 bits', body: () => ({ public_key: ssh.userKey({ type: 'rsa', bits: 1024 }) }), field: 'public_key', msg: /1024 bits; at least 2048/ },
    { reason: 'a CA that does not exist', body: () => ({ ssh_certificate_authority_id: unknownId('sshca') }), field: 'ssh_certificate_authority_id', code: 'ERR_SERVICE_107', msg: /does not exist/ },
    { reason: 'a CA id of another kind', body: () => ({ ssh_certificate_authority_id: unknownId('ca') }), field: 'ssh_certificate_authority_id', msg: /not an id of SSHCertificateAuthority/ },
  ];

  it.each(refusals)('refused with 400: $reason', async ({ body, field, code, msg }) => {
    const r = await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: key, ...body() });
    expect(expectInvalid(r, field, code).msg).toMatch(msg);
  });

  it.each([
    { reason: 'key_size on an ed25519 CA', body: { private_key_type: 'ed25519', key_size: 2048 }, field: 'key_size' },
    { reason: 'key_size on an ecdsa CA', body: { private_key_type: 'ecdsa', key_size: 4096 }, field: 'key_size' },
    { reason: 'an RSA key_size other than 2048 or 4096', body: { private_key_type: 'rsa', key_size: 1024 }, field: 'key_size' },
    { reason: 'elliptic_curve on an RSA CA', body: { private_key_type: 'rsa', elliptic_curve: 'p256' }, field: 'elliptic_curve' },
    { reason: 'elliptic_curve on an ed25519 CA', body: { private_key_type: 'ed25519', elliptic_curve: 'p384' }, field: 'elliptic_curve' },
    { reason: 'an unknown curve', body: { private_key_type: 'ecdsa', elliptic_curve: 'secp256k1' }, field: 'elliptic_curve' },
    { reason: 'an unknown key type', body: { private_key_type: 'dsa' }, field: 'private_key_type' },
    { reason: 'no key type', body: {}, field: 'private_key_type' },
  ])('SSH CA refused with 400: $reason', async ({ body, field }) => {
    expectInvalid(await s.post('/ssh_certificate_authorities', body), field);
  });

  it('PATCH changes description and metadata only, on CAs and certificates', async () => {
    const c = (await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: key })).body;
    const p = await s.patch(`/ssh_user_certificates/${c.id}`, { description: 'laptop', metadata: '{"owner":"alice"}' });
    expect(p.status, p.text).toBe(200);
    expect(p.body).toEqual({ ...c, description: 'laptop', metadata: '{"owner":"alice"}' });
    for (const field of ['principals', 'public_key', 'valid_until', 'extensions', 'critical_options', 'ssh_certificate_authority_id']) {
      expectInvalid(await s.patch(`/ssh_user_certificates/${c.id}`, { [field]: c[field] }), field, 'ERR_SERVICE_106');
    }
    const caPatch = await s.patch(`/ssh_certificate_authorities/${otherCa.id}`, { description: 'prod' });
    expect(caPatch.body).toEqual({ ...otherCa, description: 'prod' });
    for (const field of ['private_key_type', 'elliptic_curve', 'key_size']) {
      expectInvalid(await s.patch(`/ssh_certificate_authorities/${otherCa.id}`, { [field]: otherCa[field] ?? 2048 }), field, 'ERR_SERVICE_106');
    }
  });

  it('deleting a CA that signed certificates is allowed; its certificates stay readable and editable', async () => {
    const doomed = (await s.post('/ssh_certificate_authorities', { private_key_type: 'ecdsa' })).body;
    const c = (await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: doomed.id, public_key: key, principals: ['root'] })).body;
    expect((await s.del(`/ssh_certificate_authorities/${doomed.id}`)).status).toBe(204);
    expectError(await s.get(`/ssh_certificate_authorities/${doomed.id}`), 404, 'ERR_SERVICE_300');
    const got = await s.get(`/ssh_user_certificates/${c.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(c);
    expect(verifyCertificate(got.body.certificate, doomed.public_key, ssh)).toBe(true);
    expect((await s.patch(`/ssh_user_certificates/${c.id}`, { description: 'orphan' })).body.description).toBe('orphan');
    const again = await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: doomed.id, public_key: key });
    expectInvalid(again, 'ssh_certificate_authority_id', 'ERR_SERVICE_107');
    expect((await s.del(`/ssh_user_certificates/${c.id}`)).status).toBe(204);
  });

  it('lists certificates and CAs newest first', async () => {
    const list = await s.get('/ssh_user_certificates?limit=2');
    expect(list.body.ssh_user_certificates).toHaveLength(2);
    expect(list.body.next_page_uri).toContain('before_id=sucrt_');
    const cas = await s.get('/ssh_certificate_authorities');
    expect(cas.body.ssh_certificate_authorities[0].id > cas.body.ssh_certificate_authorities[1].id).toBe(true);
  });
});
