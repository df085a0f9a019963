// The live side of a plan is parsed like a manifest, so a value stored before its canonical
// form changed compares equal to what a manifest says now. A read lacks write-only values
// a create requires, so those bodies are parsed field by field.
import { describe, expect, it } from 'vitest';
import { kindOf } from '../../provider/catalog/index.js';
import { liveInput } from '../../provider/catalog/normalize.js';

const PEM = '-----BEGIN CERTIFICATE-----\r\nMIIB\r\n-----END CERTIFICATE-----';
const common = { id: 'x', uri: 'http://h/x', created_at: '2026-01-01T00:00:00Z', description: '', metadata: '' };

describe('liveInput', () => {
  it.each([
    ['a kind whose create needs a write-only value (a private key)', 'TLSCertificate', { ...common, certificate_pem: PEM, private_key_pem: null }, 'certificate_pem'],
    ['a kind whose create parses whole', 'CertificateAuthority', { ...common, ca_pem: PEM }, 'ca_pem'],
  ])('canonicalises a PEM stored verbatim: %s', (_reason, kind, read, field) => {
    expect(liveInput(kindOf(kind), read)[field]).toBe('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  });
});
