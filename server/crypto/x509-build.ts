// Builds X.509 v3 certificates (RFC 5280) as DER, signed with a node:crypto key. Node can
// parse certificates (X509Certificate) but not make them; the SAML module's request-signing
// certificate, test fixtures and any server-issued certificate are made here.
import crypto, { type KeyObject } from 'node:crypto';
import net from 'node:net';
import { bitString, bool, explicit, implicitPrimitive, nul, octetString, oid, printableString, sequence, set, smallInteger, time, tlv, unsignedInteger, utf8String, type Der } from './der.js';

/** Name attributes, in the order they are written (RFC 4514 reads them the other way). */
export interface DistinguishedName {
  country?: string;
  province?: string;
  locality?: string;
  organization?: string;
  organizationalUnit?: string;
  commonName?: string;
}

/** X.509 key usages by their snake_case names (bit positions from RFC 5280 4.2.1.3). */
export const KEY_USAGE_BITS = {
  digital_signature: 0,
  content_commitment: 1,
  key_encipherment: 2,
  data_encipherment: 3,
  key_agreement: 4,
  key_cert_sign: 5,
  crl_sign: 6,
  encipher_only: 7,
  decipher_only: 8,
} as const;
export type KeyUsage = keyof typeof KEY_USAGE_BITS;

export const EXTENDED_KEY_USAGE_OIDS = {
  server_auth: '1.3.6.1.5.5.7.3.1',
  client_auth: '1.3.6.1.5.5.7.3.2',
  code_signing: '1.3.6.1.5.5.7.3.3',
  email_protection: '1.3.6.1.5.5.7.3.4',
  time_stamping: '1.3.6.1.5.5.7.3.8',
  ocsp_signing: '1.3.6.1.5.5.7.3.9',
} as const;
export type ExtendedKeyUsage = keyof typeof EXTENDED_KEY_USAGE_OIDS;

export interface CertificateSpec {
  subject: DistinguishedName;
  /** The certified key. */
  publicKey: KeyObject;
  /** The issuer's private key (the subject's own for a self-signed certificate). */
  signingKey: KeyObject;
  /** The issuer's name; the subject's when absent (self-signed). */
  issuer?: DistinguishedName;
  /** Big-endian serial; 16 random bytes when absent. */
  serialNumber?: Buffer;
  notBefore: Date;
  notAfter: Date;
  /** basicConstraints cA, with an optional path length. */
  ca?: boolean | { pathLength: number };
  keyUsages?: KeyUsage[];
  extendedKeyUsages?: ExtendedKeyUsage[];
  dnsNames?: string[];
  ips?: string[];
}

const NAME_OIDS: [keyof DistinguishedName, string][] = [
  ['country', '2.5.4.6'],
  ['province', '2.5.4.8'],
  ['locality', '2.5.4.7'],
  ['organization', '2.5.4.10'],
  ['organizationalUnit', '2.5.4.11'],
  ['commonName', '2.5.4.3'],
];

function name(dn: DistinguishedName): Der {
  const rdns = NAME_OIDS.filter(([k]) => dn[k] !== undefined).map(([k, o]) =>
    set(sequence(oid(o), k === 'country' ? printableString(dn[k]!) : utf8String(dn[k]!))),
  );
  return sequence(...rdns);
}

/** The signature algorithm for a signing key: its AlgorithmIdentifier and the digest to sign with. */
function signatureAlgorithm(key: KeyObject): { id: Der; digest: string | null } {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return { id: sequence(oid('1.2.840.113549.1.1.11'), nul()), digest: 'sha256' };
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      if (curve === 'secp384r1') return { id: sequence(oid('1.2.840.10045.4.3.3')), digest: 'sha384' };
      if (curve === 'secp521r1') return { id: sequence(oid('1.2.840.10045.4.3.4')), digest: 'sha512' };
      return { id: sequence(oid('1.2.840.10045.4.3.2')), digest: 'sha256' };
    }
    case 'ed25519':
      return { id: sequence(oid('1.3.101.112')), digest: null };
    case 'ed448':
      return { id: sequence(oid('1.3.101.113')), digest: null };
    default:
      throw new Error(`cannot sign certificates with a ${key.asymmetricKeyType} key`);
  }
}

/** The children of a DER SEQUENCE (just enough reading to pull a key out of a SubjectPublicKeyInfo). */
function children(der: Buffer): Buffer[] {
  const out: Buffer[] = [];
  const headerOf = (at: number) => {
    const first = der[at + 1];
    if (first < 0x80) return { len: first, head: 2 };
    const n = first & 0x7f;
    return { len: der.subarray(at + 2, at + 2 + n).reduce((acc, b) => acc * 256 + b, 0), head: 2 + n };
  };
  const outer = headerOf(0);
  for (let at = outer.head; at < outer.head + outer.len; ) {
    const { len, head } = headerOf(at);
    out.push(der.subarray(at, at + head + len));
    at += head + len;
  }
  return out;
}

/** The subject key identifier: SHA-1 of the subjectPublicKey bits (RFC 5280 4.2.1.2, method 1). */
export function keyIdentifier(publicKey: KeyObject): Buffer {
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const bits = children(spki)[1];
  const { head } = bits[1] < 0x80 ? { head: 2 } : { head: 2 + (bits[1] & 0x7f) };
  return crypto.createHash('sha1').update(bits.subarray(head + 1)).digest();
}

/** KeyUsage as a DER named-bit BIT STRING: trailing zero bits dropped. */
function keyUsageBits(usages: KeyUsage[]): Der {
  const positions = usages.map((u) => KEY_USAGE_BITS[u]);
  const highest = Math.max(...positions);
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1);
  for (const p of positions) bytes[Math.floor(p / 8)] |= 0x80 >> p % 8;
  const unused = 7 - (highest % 8);
  return tlv(0x03, Buffer.concat([Buffer.from([unused]), bytes]));
}

const extension = (id: string, critical: boolean, value: Der) =>
  sequence(oid(id), ...(critical ? [bool(true)] : []), octetString(value));

function ipBytes(ip: string): Buffer {
  if (net.isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!net.isIPv6(ip)) throw new Error(`${ip} is not an IP address`);
  // An embedded IPv4 tail (::ffff:192.0.2.1) is two groups.
  const text = ip.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_m, a, b, c, d) => `${((+a << 8) | +b).toString(16)}:${((+c << 8) | +d).toString(16)}`);
  const [head, tail] = text.split('::');
  const groups = (s: string | undefined) => (s ? s.split(':') : []);
  const fill = tail === undefined ? [] : Array(8 - groups(head).length - groups(tail).length).fill('0');
  return Buffer.from([...groups(head), ...fill, ...groups(tail)].flatMap((g) => { const n = parseInt(g, 16); return [n >> 8, n & 0xff]; }));
}

function extensions(spec: CertificateSpec): Der[] {
  const out: Der[] = [];
  if (spec.ca !== undefined) {
    const pathLength = typeof spec.ca === 'object' ? [smallInteger(spec.ca.pathLength)] : [];
    out.push(extension('2.5.29.19', true, sequence(...(spec.ca ? [bool(true), ...pathLength] : []))));
  }
  if (spec.keyUsages?.length) out.push(extension('2.5.29.15', true, keyUsageBits(spec.keyUsages)));
  if (spec.extendedKeyUsages?.length) {
    out.push(extension('2.5.29.37', false, sequence(...spec.extendedKeyUsages.map((u) => oid(EXTENDED_KEY_USAGE_OIDS[u])))));
  }
  const alt = [...(spec.dnsNames ?? []).map((d) => implicitPrimitive(2, Buffer.from(d, 'ascii'))), ...(spec.ips ?? []).map((ip) => implicitPrimitive(7, ipBytes(ip)))];
  if (alt.length) out.push(extension('2.5.29.17', false, sequence(...alt)));
  out.push(extension('2.5.29.14', false, octetString(keyIdentifier(spec.publicKey))));
  const issuerKey = crypto.createPublicKey(spec.signingKey);
  out.push(extension('2.5.29.35', false, sequence(implicitPrimitive(0, keyIdentifier(issuerKey)))));
  return out;
}

/** A random positive serial of 16 bytes (RFC 5280 allows up to 20). */
export function randomSerial(): Buffer {
  const b = crypto.randomBytes(16);
  b[0] &= 0x7f;
  if (b[0] === 0) b[0] = 1;
  return b;
}

/** Builds and signs a certificate; returns its DER. */
export function buildCertificate(spec: CertificateSpec): Buffer {
  const alg = signatureAlgorithm(spec.signingKey);
  const tbs = sequence(
    explicit(0, smallInteger(2)),
    unsignedInteger(spec.serialNumber ?? randomSerial()),
    alg.id,
    name(spec.issuer ?? spec.subject),
    sequence(time(spec.notBefore), time(spec.notAfter)),
    name(spec.subject),
    spec.publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, sequence(...extensions(spec))),
  );
  const signature = crypto.sign(alg.digest, tbs, spec.signingKey);
  return sequence(tbs, alg.id, bitString(signature));
}

/** PEM armour for DER bytes. */
export function pemOf(der: Buffer, label = 'CERTIFICATE'): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

export type KeySpec = { type: 'rsa'; bits?: number } | { type: 'ecdsa'; curve?: 'P-256' | 'P-384' | 'P-521' } | { type: 'ed25519' };

export function generateKey(spec: KeySpec = { type: 'ecdsa' }): crypto.KeyPairKeyObjectResult {
  if (spec.type === 'rsa') return crypto.generateKeyPairSync('rsa', { modulusLength: spec.bits ?? 2048 });
  if (spec.type === 'ed25519') return crypto.generateKeyPairSync('ed25519');
  return crypto.generateKeyPairSync('ec', { namedCurve: spec.curve ?? 'P-256' });
}

/** As generateKey, off the event loop (RSA generation takes tens of milliseconds). */
export function generateKeyAsync(spec: KeySpec = { type: 'ecdsa' }): Promise<crypto.KeyPairKeyObjectResult> {
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, publicKey: KeyObject, privateKey: KeyObject) => (err ? reject(err) : resolve({ publicKey, privateKey }));
    if (spec.type === 'rsa') crypto.generateKeyPair('rsa', { modulusLength: spec.bits ?? 2048 }, done);
    else if (spec.type === 'ed25519') crypto.generateKeyPair('ed25519', {}, done);
    else crypto.generateKeyPair('ec', { namedCurve: spec.curve ?? 'P-256' }, done);
  });
}

export interface IssuedCertificate {
  certificatePem: string;
  privateKeyPem: string;
  privateKey: KeyObject;
  der: Buffer;
}

/**
 * A certificate for a fresh key (or `keyPair`), self-signed unless an issuer (its name and
 * private key) is given. Validity starts now and lasts `days`.
 */
export function issueCertificate(opts: Omit<CertificateSpec, 'publicKey' | 'signingKey' | 'notBefore' | 'notAfter' | 'issuer'> & {
  key?: KeySpec;
  keyPair?: crypto.KeyPairKeyObjectResult;
  days?: number;
  notBefore?: Date;
  issuer?: { name: DistinguishedName; privateKey: KeyObject };
}): IssuedCertificate {
  const { key, keyPair, days = 365, notBefore = new Date(), issuer, ...rest } = opts;
  const pair = keyPair ?? generateKey(key);
  const start = new Date(Math.floor(notBefore.getTime() / 1000) * 1000);
  const der = buildCertificate({
    ...rest,
    publicKey: pair.publicKey,
    signingKey: issuer?.privateKey ?? pair.privateKey,
    issuer: issuer?.name,
    notBefore: start,
    notAfter: new Date(start.getTime() + days * 86_400_000),
  });
  return { certificatePem: pemOf(der), privateKeyPem: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, privateKey: pair.privateKey, der };
}
