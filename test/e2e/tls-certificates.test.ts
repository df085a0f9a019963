// TLS certificates and X.509 certificate authorities against the real server, with keys
// and certificates made by the openssl command line: every parsed field round-trips, and
// each kind of bad upload is refused with 400 naming the field, without echoing key material.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, ID, RFC3339 } from '../helpers/api.js';
import { Pki, type CertSpec, type Issued, type KeySpec } from '../helpers/pki.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let pki: Pki;
beforeAll(async () => {
  s = await startTestServer();
  pki = new Pki();
});
afterAll(async () => {
  await s.close();
  pki.close();
});

/** No line of the key's base64 and no PEM armour appears in the text (a response or the logs). */
function expectNoKey(text: string, key: string) {
  for (const line of key.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'))) expect(text).not.toContain(line);
  expect(text).not.toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY/);
}

describe('TLS certificates: every parsed field round-trips', () => {
  const cases: { reason: string; key: KeySpec; spec: CertSpec; type: string; expect: Record<string, unknown> }[] = [
    {
      reason: 'RSA key, full subject, DNS (with a wildcard) and IP SANs, key usages and extended key usages',
      key: 'rsa2048',
      type: 'rsa',
      spec: {
        subject: [['C', 'US'], ['ST', 'California'], ['L', 'San Francisco'], ['O', 'Acme, Inc.'], ['OU', 'Edge'], ['CN', 'example.com']],
        sans: ['DNS:example.com', 'DNS:*.example.com', 'IP:10.1.2.3', 'IP:2001:db8:0:0:0:0:0:1'],
        keyUsage: ['digitalSignature', 'keyEncipherment'],
        extendedKeyUsage: ['serverAuth', 'clientAuth'],
        serial: '00c0ffee0123456789',
      },
      expect: {
        subject_common_name: 'example.com',
        subject_country: 'US',
        subject_province: 'California',
        subject_locality: 'San Francisco',
        subject_organization: 'Acme, Inc.',
        subject_organizational_unit: 'Edge',
        issuer_common_name: 'example.com',
        subject_alternative_names: { dns_names: ['example.com', '*.example.com'], ips: ['10.1.2.3', '2001:db8::1'] },
        key_usages: ['digital_signature', 'key_encipherment'],
        extended_key_usages: ['server_auth', 'client_auth'],
        serial_number: 'c0ffee0123456789',
      },
    },
    {
      reason: 'ECDSA P-256 key, only a CN, no extensions: absent subject fields are "", SANs and usages empty',
      key: 'p256',
      type: 'ecdsa',
      spec: { subject: [['CN', 'bare.example']], serial: '01' },
      expect: {
        subject_common_name: 'bare.example',
        subject_country: '',
        subject_province: '',
        subject_locality: '',
        subject_organization: '',
        subject_organizational_unit: '',
        subject_alternative_names: { dns_names: [], ips: [] },
        key_usages: [],
        extended_key_usages: [],
        serial_number: '1',
      },
    },
    {
      reason: 'Ed25519 key with IP SANs only, UTF-8 in the subject',
      key: 'ed25519',
      type: 'ed25519',
      spec: {
        subject: [['O', 'Société Générale'], ['CN', 'ip-only']],
        sans: ['IP:192.168.0.1', 'IP:::1', 'IP:fe80:0:0:0:1:0:0:0'],
        keyUsage: ['digitalSignature'],
        extendedKeyUsage: ['serverAuth', 'codeSigning', 'emailProtection', 'timeStamping', 'OCSPSigning'],
      },
      expect: {
        subject_common_name: 'ip-only',
        subject_organization: 'Société Générale',
        subject_alternative_names: { dns_names: [], ips: ['192.168.0.1', '::1', 'fe80::1:0:0:0'] },
        key_usages: ['digital_signature'],
        extended_key_usages: ['server_auth', 'code_signing', 'email_protection', 'time_stamping', 'ocsp_signing'],
      },
    },
    {
      reason: 'ECDSA P-384 and P-521 keys are ECDSA too; a subject without a CN reads ""',
      key: 'p521',
      type: 'ecdsa',
      spec: { subject: [['O', 'No Common Name']], sans: ['DNS:nocn.example'], keyUsage: ['digitalSignature', 'keyAgreement', 'nonRepudiation'] },
      expect: { subject_common_name: '', subject_organization: 'No Common Name', key_usages: ['digital_signature', 'content_commitment', 'key_agreement'] },
    },
  ];

  it.each(cases)('$reason', async ({ key, spec, type, expect: want }) => {
    const made = pki.issue(key, spec);
    const r = await s.post('/tls_certificates', { certificate_pem: made.cert, private_key_pem: made.key, description: 'web', metadata: '{"team":"edge"}' });
    expect(r.status, r.text).toBe(201);
    const c = r.body;
    expect(c.id).toMatch(ID);
    expect(c.id.startsWith('cert_')).toBe(true);
    expect(c.uri).toBe(`${s.url}/tls_certificates/${c.id}`);
    expect(c.created_at).toMatch(RFC3339);
    expect(c).toMatchObject({ description: 'web', metadata: '{"team":"edge"}', certificate_pem: made.cert, private_key_type: type, issued_at: null, ...want });
    expect(c).toMatchObject(pki.dates(made));
    expect(c.serial_number).toBe(pki.serial(made));
    expect('private_key_pem' in c).toBe(false);
    expectNoKey(r.text, made.key);
    // Reading and listing give the same representation.
    const got = await s.get(`/tls_certificates/${c.id}`);
    expect(got.body).toEqual(c);
    const list = await s.get('/tls_certificates');
    expect(list.body.tls_certificates.find((x: { id: string }) => x.id === c.id)).toEqual(c);
    expectNoKey(got.text + list.text + s.logs.join('\n'), made.key);
  });

  it('a CA-signed chain (leaf, intermediate, root): the leaf is read, issuer_common_name is the intermediate', async () => {
    const root = pki.issue('rsa2048', { subject: [['CN', 'Test Root']], ca: true, keyUsage: ['keyCertSign', 'cRLSign'] });
    const inter = pki.issue('p384', { subject: [['CN', 'Test Intermediate']], ca: true, keyUsage: ['keyCertSign'] }, root);
    const leaf = pki.issue('p256', { subject: [['CN', 'leaf.example']], sans: ['DNS:leaf.example'], keyUsage: ['digitalSignature'], extendedKeyUsage: ['serverAuth'], serial: '7b' }, inter);
    for (const chain of [leaf.cert + inter.cert + root.cert, leaf.cert + inter.cert]) {
      const r = await s.post('/tls_certificates', { certificate_pem: chain, private_key_pem: leaf.key });
      expect(r.status, r.text).toBe(201);
      expect(r.body).toMatchObject({
        subject_common_name: 'leaf.example',
        issuer_common_name: 'Test Intermediate',
        serial_number: '7b',
        private_key_type: 'ecdsa',
        subject_alternative_names: { dns_names: ['leaf.example'], ips: [] },
        certificate_pem: chain,
        ...pki.dates(leaf),
      });
    }
  });

  it('PATCH changes description and metadata only; the certificate and key cannot change', async () => {
    const made = pki.issue('p256', { subject: [['CN', 'patch.example']] });
    const c = (await s.post('/tls_certificates', { certificate_pem: made.cert, private_key_pem: made.key })).body;
    const r = await s.patch(`/tls_certificates/${c.id}`, { description: 'renamed', metadata: 'm' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ ...c, description: 'renamed', metadata: 'm' });
    const other = pki.issue('p256', { subject: [['CN', 'other.example']] });
    expectInvalid(await s.patch(`/tls_certificates/${c.id}`, { certificate_pem: other.cert }), 'certificate_pem', 'ERR_SERVICE_106');
    expectInvalid(await s.patch(`/tls_certificates/${c.id}`, { private_key_pem: other.key }), 'private_key_pem', 'ERR_SERVICE_106');
    expect((await s.del(`/tls_certificates/${c.id}`)).status).toBe(204);
    expectError(await s.get(`/tls_certificates/${c.id}`), 404, 'ERR_SERVICE_300');
  });
});

describe('TLS certificates: refusals are 400 naming the field, never echoing the key', () => {
  let good: Issued;
  let root: Issued;
  let inter: Issued;
  let leaf: Issued;
  beforeAll(() => {
    good = pki.issue('p256', { subject: [['CN', 'good.example']] });
    root = pki.issue('p256', { subject: [['CN', 'Root']], ca: true });
    inter = pki.issue('p256', { subject: [['CN', 'Intermediate']], ca: true }, root);
    leaf = pki.issue('p256', { subject: [['CN', 'leaf']] }, inter);
  });

  const encrypted = () => pki.openssl(['pkey', '-aes-256-cbc', '-passout', 'pass:secret'], good.key);
  const cases: { reason: string; body: () => Record<string, string>; field: string; msg: RegExp }[] = [
    { reason: 'certificate_pem is not PEM at all', body: () => ({ certificate_pem: 'hello', private_key_pem: good.key }), field: 'certificate_pem', msg: /PEM/ },
    { reason: 'the base64 inside the PEM is broken', body: () => ({ certificate_pem: '-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n', private_key_pem: good.key }), field: 'certificate_pem', msg: /base64/ },
    { reason: 'a BEGIN line without its END', body: () => ({ certificate_pem: good.cert.replace(/-----END CERTIFICATE-----\n$/, ''), private_key_pem: good.key }), field: 'certificate_pem', msg: /without its partner/ },
    { reason: 'a CERTIFICATE block that is not a certificate', body: () => ({ certificate_pem: '-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n', private_key_pem: good.key }), field: 'certificate_pem', msg: /not a valid X\.509 certificate/ },
    { reason: 'the private key pasted into certificate_pem', body: () => ({ certificate_pem: good.cert + good.key, private_key_pem: good.key }), field: 'certificate_pem', msg: /PRIVATE KEY.*does not belong/ },
    { reason: 'a key that does not match the leaf', body: () => ({ certificate_pem: good.cert, private_key_pem: leaf.key }), field: 'private_key_pem', msg: /does not match.*good\.example/ },
    { reason: 'the chain out of order (root before intermediate)', body: () => ({ certificate_pem: leaf.cert + root.cert + inter.cert, private_key_pem: leaf.key }), field: 'certificate_pem', msg: /certificate 1 \(CN=leaf\) is not signed by certificate 2 \(CN=Root\)/ },
    { reason: 'an unrelated certificate after the leaf', body: () => ({ certificate_pem: leaf.cert + good.cert, private_key_pem: leaf.key }), field: 'certificate_pem', msg: /not signed by/ },
    { reason: 'an Ed448 key: unsupported key type', body: () => { const c = pki.issue('ed448', { subject: [['CN', 'ed448']] }); return { certificate_pem: c.cert, private_key_pem: c.key }; }, field: 'private_key_pem', msg: /ed448 is not supported/ },
    { reason: 'an ECDSA key on secp256k1: unsupported curve', body: () => { const c = pki.issue('secp256k1', { subject: [['CN', 'k1']] }); return { certificate_pem: c.cert, private_key_pem: c.key }; }, field: 'private_key_pem', msg: /secp256k1, which is not supported/ },
    { reason: 'an encrypted private key', body: () => ({ certificate_pem: good.cert, private_key_pem: encrypted() }), field: 'private_key_pem', msg: /encrypted/ },
    { reason: 'two private keys', body: () => ({ certificate_pem: good.cert, private_key_pem: good.key + leaf.key }), field: 'private_key_pem', msg: /exactly one private key/ },
    { reason: 'a certificate where the key should be', body: () => ({ certificate_pem: good.cert, private_key_pem: good.cert }), field: 'private_key_pem', msg: /expected PRIVATE KEY/ },
    { reason: 'an OpenSSH private key', body: () => ({ certificate_pem: good.cert, private_key_pem: '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n' }), field: 'private_key_pem', msg: /ssh-keygen -p -m PKCS8/ },
    { reason: 'a PRIVATE KEY block that is not a key', body: () => ({ certificate_pem: good.cert, private_key_pem: '-----BEGIN PRIVATE KEY-----\nMAMCAQE=\n-----END PRIVATE KEY-----\n' }), field: 'private_key_pem', msg: /not a valid PKCS#8 private key/ },
    { reason: 'no private key at all', body: () => ({ certificate_pem: good.cert }), field: 'private_key_pem', msg: /required/ },
  ];

  it.each(cases)('$reason', async ({ body, field, msg }) => {
    const sent = body();
    const r = await s.post('/tls_certificates', sent);
    const err = expectInvalid(r, field);
    expect(err.msg).toMatch(msg);
    for (const pem of [good.key, leaf.key]) expectNoKey(r.text, pem);
  });

  it('nothing refused was stored', async () => {
    const list = await s.get('/tls_certificates');
    expect(list.body.tls_certificates.some((c: { subject_common_name: string }) => ['ed448', 'k1'].includes(c.subject_common_name))).toBe(false);
  });
});

describe('certificate authorities: ca_pem is parsed', () => {
  it('a CA certificate reads back its subject, validity and usages', async () => {
    const ca = pki.issue('rsa2048', { subject: [['O', 'Acme'], ['CN', 'Acme Client CA']], ca: true, keyUsage: ['keyCertSign', 'cRLSign', 'digitalSignature'], extendedKeyUsage: ['clientAuth'] });
    const r = await s.post('/certificate_authorities', { ca_pem: ca.cert, description: 'clients' });
    expect(r.status, r.text).toBe(201);
    expect(r.body.id.startsWith('ca_')).toBe(true);
    expect(r.body).toMatchObject({
      ca_pem: ca.cert,
      description: 'clients',
      subject_common_name: 'Acme Client CA',
      key_usages: ['digital_signature', 'key_cert_sign', 'crl_sign'],
      extended_key_usages: ['client_auth'],
      ...pki.dates(ca),
    });
    expect((await s.get(`/certificate_authorities/${r.body.id}`)).body).toEqual(r.body);
    const p = await s.patch(`/certificate_authorities/${r.body.id}`, { metadata: 'x' });
    expect(p.body).toEqual({ ...r.body, metadata: 'x' });
    expectInvalid(await s.patch(`/certificate_authorities/${r.body.id}`, { ca_pem: ca.cert }), 'ca_pem', 'ERR_SERVICE_106');
  });

  it.each([
    { reason: 'not PEM', pem: () => 'not a certificate', msg: /PEM/ },
    { reason: 'PEM that is not a certificate', pem: () => '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', msg: /not a valid X\.509 certificate/ },
    { reason: 'a leaf certificate (no CA:TRUE)', pem: () => pki.issue('p256', { subject: [['CN', 'leafy']], ca: false }).cert, msg: /CN=leafy\) is not a CA/ },
    { reason: 'a certificate without basic constraints', pem: () => pki.issue('p256', { subject: [['CN', 'plain']] }).cert, msg: /is not a CA/ },
    { reason: 'two certificates', pem: () => { const a = pki.issue('p256', { subject: [['CN', 'a']], ca: true }); return a.cert + a.cert; }, msg: /exactly one certificate/ },
    { reason: 'a private key', pem: () => pki.key('p256').pem, msg: /expected CERTIFICATE/ },
  ])('refused with 400: $reason', async ({ pem, msg }) => {
    const err = expectInvalid(await s.post('/certificate_authorities', { ca_pem: pem() }), 'ca_pem');
    expect(err.msg).toMatch(msg);
  });
});
