// The DER certificate builder: what it makes, node's own X.509 parser reads back and verifies.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { issueCertificate, keyIdentifier, type KeySpec } from '../../server/crypto/x509-build.js';

const keys: [string, KeySpec][] = [
  ['RSA 2048', { type: 'rsa', bits: 2048 }],
  ['ECDSA P-256', { type: 'ecdsa', curve: 'P-256' }],
  ['ECDSA P-384', { type: 'ecdsa', curve: 'P-384' }],
  ['ECDSA P-521', { type: 'ecdsa', curve: 'P-521' }],
  ['Ed25519', { type: 'ed25519' }],
];

describe.each(keys)('%s', (_name, key) => {
  const caName = { commonName: 'Test CA', organization: 'Edge Ltd', organizationalUnit: 'Ops', locality: 'London', province: 'England', country: 'GB' };
  const ca = issueCertificate({ key, subject: caName, ca: true, keyUsages: ['key_cert_sign', 'crl_sign'], days: 30 });
  const leaf = issueCertificate({
    key,
    subject: { commonName: 'app.example.com' },
    issuer: { name: caName, privateKey: ca.privateKey },
    dnsNames: ['app.example.com', '*.example.com'],
    ips: ['192.0.2.1', '2001:db8::1', '::ffff:10.0.0.1'],
    keyUsages: ['digital_signature', 'key_encipherment'],
    extendedKeyUsages: ['server_auth', 'client_auth'],
  });
  const caCert = new crypto.X509Certificate(ca.certificatePem);
  const leafCert = new crypto.X509Certificate(leaf.certificatePem);

  it('a self-signed CA: names, validity, basic constraints, signature', () => {
    expect(caCert.subject.split('\n')).toEqual(['C=GB', 'ST=England', 'L=London', 'O=Edge Ltd', 'OU=Ops', 'CN=Test CA']);
    expect(caCert.issuer).toBe(caCert.subject);
    expect(caCert.ca).toBe(true);
    expect(caCert.verify(caCert.publicKey)).toBe(true);
    expect(new Date(caCert.validTo).getTime() - new Date(caCert.validFrom).getTime()).toBe(30 * 86_400_000);
    expect(caCert.checkPrivateKey(ca.privateKey)).toBe(true);
  });

  it('a leaf issued by it: chain, alternative names, extended key usages, positive serial', () => {
    expect(leafCert.ca).toBe(false);
    expect(leafCert.checkIssued(caCert)).toBe(true);
    expect(leafCert.verify(caCert.publicKey)).toBe(true);
    expect(leafCert.verify(leafCert.publicKey)).toBe(false);
    expect(leafCert.subjectAltName).toBe('DNS:app.example.com, DNS:*.example.com, IP Address:192.0.2.1, IP Address:2001:DB8:0:0:0:0:0:1, IP Address:0:0:0:0:0:FFFF:A00:1');
    expect(leafCert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
    expect(leafCert.serialNumber).toMatch(/^[0-7][0-9A-F]{31}$/);
    expect(leafCert.checkPrivateKey(leaf.privateKey)).toBe(true);
  });

  it('the subject key identifier is the SHA-1 of the key bits, and two keys differ', () => {
    expect(keyIdentifier(caCert.publicKey)).toHaveLength(20);
    expect(keyIdentifier(caCert.publicKey).equals(keyIdentifier(leafCert.publicKey))).toBe(false);
  });
});

it('validity after 2049 is written as GeneralizedTime and read back', () => {
  const c = issueCertificate({ subject: { commonName: 'far' }, notBefore: new Date('2060-01-02T03:04:05Z'), days: 1 });
  const x = new crypto.X509Certificate(c.certificatePem);
  expect(new Date(x.validFrom).toISOString()).toBe('2060-01-02T03:04:05.000Z');
  expect(new Date(x.validTo).toISOString()).toBe('2060-01-03T03:04:05.000Z');
});
