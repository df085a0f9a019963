// Checks an uploaded certificate chain and private key, and a CA certificate, and reads
// the fields the API shows. node:crypto verifies signatures and matches keys; the DER
// reader supplies names, validity, usages and SANs. Problems are values naming the field,
// with a sentence that never quotes key material.
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { DerError } from './der-read.js';
import { readPem, type PemBlock } from './pem.js';
import { NAME_OID, nameValue, readCertificate, type X509Parts } from './x509-read.js';

export type Checked<T> = { ok: true; value: T } | { ok: false; field: string; message: string };

const fail = (field: string, message: string): { ok: false; field: string; message: string } => ({ ok: false, field, message });

export interface Certificate {
  x509: X509Certificate;
  parts: X509Parts;
}

export type PrivateKeyType = 'rsa' | 'ecdsa' | 'ed25519';

/** Fields every certificate read form shows (CA and TLS). */
export interface CertificateFields {
  subject_common_name: string;
  not_before: Date;
  not_after: Date;
  key_usages: string[];
  extended_key_usages: string[];
}

export interface TlsFields extends CertificateFields {
  subject_alternative_names: { dns_names: string[]; ips: string[] };
  private_key_type: PrivateKeyType;
  issuer_common_name: string;
  serial_number: string;
  subject_organization: string;
  subject_organizational_unit: string;
  subject_locality: string;
  subject_province: string;
  subject_country: string;
}

/** Named curves by OpenSSL name; others (secp256k1, brainpool) are refused. */
const CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1']);
const SUPPORTED = 'RSA, ECDSA on P-256, P-384 or P-521, or Ed25519';

/** A certificate in messages: what it is, and its CN when it has one. */
const named = (c: Certificate, what: string) => {
  const cn = nameValue(c.parts.subject, NAME_OID.commonName);
  return `${what}${cn ? ` (CN=${cn})` : ''}`;
};

/** Every CERTIFICATE block of a PEM text, parsed. */
export function readCertificates(field: string, text: string): Checked<Certificate[]> {
  const pem = readPem(text);
  if (!pem.ok) return fail(field, pem.message);
  const certs: Certificate[] = [];
  for (const [i, block] of pem.blocks.entries()) {
    if (block.label !== 'CERTIFICATE') {
      const hint = block.label.endsWith('PRIVATE KEY') ? '; a private key does not belong here' : '';
      return fail(field, `PEM block ${i + 1} is ${block.label}, expected CERTIFICATE${hint}`);
    }
    try {
      certs.push({ x509: new X509Certificate(block.der), parts: readCertificate(block.der) });
    } catch (e) {
      const why = e instanceof DerError ? `: ${e.message}` : '';
      return fail(field, `PEM block ${i + 1} is not a valid X.509 certificate${why}`);
    }
  }
  return { ok: true, value: certs };
}

export function certificateFields(c: Certificate): CertificateFields {
  return {
    subject_common_name: nameValue(c.parts.subject, NAME_OID.commonName),
    not_before: c.parts.notBefore,
    not_after: c.parts.notAfter,
    key_usages: c.parts.keyUsages,
    extended_key_usages: c.parts.extendedKeyUsages,
  };
}

/** The key type the API names, or a sentence saying why the key is not supported. */
export function keyTypeOf(key: KeyObject): PrivateKeyType | string {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return 'rsa';
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve ?? 'unknown';
      return CURVES.has(curve) ? 'ecdsa' : `the key is ECDSA on curve ${curve}, which is not supported; use ${SUPPORTED}`;
    }
    case 'ed25519':
      return 'ed25519';
    default:
      return `the key type ${key.asymmetricKeyType ?? 'unknown'} is not supported; use ${SUPPORTED}`;
  }
}

/** Private key PEM labels and the PKCS form each one is. */
const KEY_LABELS: Record<string, { type: 'pkcs8' | 'pkcs1' | 'sec1'; name: string }> = {
  'PRIVATE KEY': { type: 'pkcs8', name: 'PKCS#8' },
  'RSA PRIVATE KEY': { type: 'pkcs1', name: 'PKCS#1' },
  'EC PRIVATE KEY': { type: 'sec1', name: 'SEC1' },
};

function readPrivateKey(field: string, text: string): Checked<KeyObject> {
  const pem = readPem(text);
  if (!pem.ok) return fail(field, pem.message);
  // `openssl ecparam -genkey` writes EC PARAMETERS before the key; they add nothing.
  const blocks = pem.blocks.filter((b) => b.label !== 'EC PARAMETERS');
  if (blocks.length !== 1) return fail(field, `must hold exactly one private key, found ${blocks.length} PEM blocks`);
  const [block] = blocks as [PemBlock];
  if (block.label === 'ENCRYPTED PRIVATE KEY' || /ENCRYPTED/.test(block.headers['Proc-Type'] ?? '')) {
    return fail(field, 'the private key is encrypted; upload it unencrypted (e.g. openssl pkey -in key.pem -out plain.pem)');
  }
  if (block.label === 'OPENSSH PRIVATE KEY') return fail(field, 'is an OpenSSH private key; convert it to PKCS#8 PEM with ssh-keygen -p -m PKCS8 -f <file>');
  if (block.label === 'DSA PRIVATE KEY') return fail(field, `the key type dsa is not supported; use ${SUPPORTED}`);
  const form = KEY_LABELS[block.label];
  if (!form) return fail(field, `PEM block is ${block.label}, expected PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY`);
  try {
    return { ok: true, value: createPrivateKey({ key: block.der, format: 'der', type: form.type }) };
  } catch {
    return fail(field, `is not a valid ${form.name} private key`);
  }
}

/**
 * A TLS certificate upload: the chain (leaf first, each certificate signed by the next)
 * and the leaf's private key. Returns the read fields of the leaf.
 */
export function inspectTlsUpload(certificatePem: string, privateKeyPem: string): Checked<TlsFields> {
  const chain = readCertificates('certificate_pem', certificatePem);
  if (!chain.ok) return chain;
  const certs = chain.value;
  const key = readPrivateKey('private_key_pem', privateKeyPem);
  if (!key.ok) return key;
  const type = keyTypeOf(key.value);
  if (type !== 'rsa' && type !== 'ecdsa' && type !== 'ed25519') return fail('private_key_pem', type);
  const [leaf] = certs;
  if (!leaf.x509.checkPrivateKey(key.value)) {
    return fail('private_key_pem', `the private key does not match the public key of ${named(leaf, 'the leaf certificate')}, the first in certificate_pem`);
  }
  for (let i = 0; i + 1 < certs.length; i++) {
    const [child, parent] = [certs[i], certs[i + 1]];
    let signed = false;
    try {
      signed = child.x509.checkIssued(parent.x509) && child.x509.verify(parent.x509.publicKey);
    } catch {
      signed = false;
    }
    if (!signed) {
      return fail('certificate_pem', `${named(child, `certificate ${i + 1}`)} is not signed by ${named(parent, `certificate ${i + 2}`)}; the chain must be in order, leaf first, each certificate issued by the next`);
    }
  }
  const p = leaf.parts;
  const attr = (oid: string) => nameValue(p.subject, oid);
  return {
    ok: true,
    value: {
      ...certificateFields(leaf),
      subject_alternative_names: p.subjectAltNames,
      private_key_type: type,
      issuer_common_name: nameValue(p.issuer, NAME_OID.commonName),
      serial_number: p.serial,
      subject_organization: attr(NAME_OID.organization),
      subject_organizational_unit: attr(NAME_OID.organizationalUnit),
      subject_locality: attr(NAME_OID.locality),
      subject_province: attr(NAME_OID.province),
      subject_country: attr(NAME_OID.country),
    },
  };
}

/** A certificate authority for mutual TLS: exactly one certificate, marked as a CA. */
export function inspectCaCertificate(caPem: string): Checked<CertificateFields> {
  const read = readCertificates('ca_pem', caPem);
  if (!read.ok) return read;
  if (read.value.length !== 1) return fail('ca_pem', `must hold exactly one certificate, found ${read.value.length}; create one certificate authority per certificate`);
  const [ca] = read.value;
  if (!ca.parts.isCA) {
    return fail('ca_pem', `${named(ca, 'the certificate')} is not a CA: its basic constraints extension must say CA:TRUE`);
  }
  return { ok: true, value: certificateFields(ca) };
}
