// The X.509 reader against the X.509 builder: whatever the server builds (SAML signing
// certificates, server-issued certificates) it reads back field for field. The TLS
// end-to-end suite checks the reader against openssl-made certificates as well.
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DerError } from '../../server/crypto/der-read.js';
import { buildCertificate, generateKey, type CertificateSpec } from '../../server/crypto/x509-build.js';
import { NAME_OID, nameValue, readCertificate } from '../../server/crypto/x509-read.js';

const key = generateKey({ type: 'ecdsa' });
const base = (over: Partial<CertificateSpec>): CertificateSpec => ({
  subject: { commonName: 'reader.example' },
  publicKey: key.publicKey,
  signingKey: key.privateKey,
  notBefore: new Date('2026-01-02T03:04:05Z'),
  notAfter: new Date('2060-01-02T03:04:05Z'),
  ...over,
});

describe('readCertificate on built certificates', () => {
  it('reads names, serial, validity (UTCTime and GeneralizedTime), usages, SANs and cA', () => {
    const der = buildCertificate(
      base({
        subject: { country: 'DE', province: 'Berlin', locality: 'Berlin', organization: 'Ünïcode GmbH', organizationalUnit: 'Ops', commonName: 'reader.example' },
        issuer: { commonName: 'Issuer CA' },
        serialNumber: Buffer.from('00ab01', 'hex'),
        ca: { pathLength: 0 },
        keyUsages: ['digital_signature', 'key_cert_sign', 'decipher_only'],
        extendedKeyUsages: ['server_auth', 'ocsp_signing'],
        dnsNames: ['reader.example', '*.reader.example'],
        ips: ['192.0.2.1', '2001:db8::8:800:200c:417a', '::ffff:192.0.2.1'],
      }),
    );
    const c = readCertificate(der);
    expect(c.version).toBe(3);
    expect(c.serial).toBe('ab01');
    expect(c.notBefore.toISOString()).toBe('2026-01-02T03:04:05.000Z');
    expect(c.notAfter.toISOString()).toBe('2060-01-02T03:04:05.000Z');
    expect(nameValue(c.issuer, NAME_OID.commonName)).toBe('Issuer CA');
    expect(Object.fromEntries(Object.entries(NAME_OID).map(([k, oid]) => [k, nameValue(c.subject, oid)]))).toEqual({
      commonName: 'reader.example',
      country: 'DE',
      locality: 'Berlin',
      province: 'Berlin',
      organization: 'Ünïcode GmbH',
      organizationalUnit: 'Ops',
    });
    expect(c.keyUsages).toEqual(['digital_signature', 'key_cert_sign', 'decipher_only']);
    expect(c.extendedKeyUsages).toEqual(['server_auth', 'ocsp_signing']);
    expect(c.subjectAltNames).toEqual({ dns_names: ['reader.example', '*.reader.example'], ips: ['192.0.2.1', '2001:db8::8:800:200c:417a', '::ffff:192.0.2.1'] });
    expect(c.isCA).toBe(true);
    // node:crypto agrees on what it exposes.
    const x = new X509Certificate(der);
    expect(x.serialNumber.toLowerCase().replace(/^0+/, '')).toBe(c.serial);
    expect(x.subject).toContain('CN=reader.example');
  });

  it('a certificate without extensions: no usages, no SANs, not a CA', () => {
    const c = readCertificate(buildCertificate(base({})));
    expect(c).toMatchObject({ keyUsages: [], extendedKeyUsages: [], subjectAltNames: { dns_names: [], ips: [] }, isCA: false });
  });

  it.each([
    { reason: 'not DER at all', der: Buffer.from('hello') },
    { reason: 'a truncated certificate', der: buildCertificate(base({})).subarray(0, 100) },
    { reason: 'a SEQUENCE of the wrong shape', der: Buffer.from('3003020101', 'hex') },
  ])('refuses $reason with DerError', ({ der }) => {
    expect(() => readCertificate(der)).toThrow(DerError);
  });
});
