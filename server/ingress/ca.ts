// The ingress's own certificate authority, for names no uploaded certificate covers (like
// mkcert): made on first start with an ingress, its key owner-only in the data folder and
// its certificate at <data>/ingress-ca.pem for clients to trust. Leaf certificates share one
// key made at start (a name costs one ECDSA signature, not a key generation) and are kept
// for a bounded number of names.
import type { KeyObject } from 'node:crypto';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { generateKey, issueCertificate, type DistinguishedName } from '../crypto/x509-build.js';

export const CA_FILE = 'ingress-ca.pem';
const KEY_FILE = 'ingress-ca-key.pem';
const CA_NAME: DistinguishedName = { organization: 'edgeform', commonName: 'edgeform local ingress CA' };
const CA_DAYS = 3650;
const LEAF_DAYS = 30;
/** Names whose leaf is kept; the oldest is dropped past it (it is re-issued if asked again). */
const MAX_LEAVES = 1000;

export interface Leaf {
  certificatePem: string;
  privateKeyPem: string;
  notAfter: number;
}

export interface LocalCa {
  /** Where the CA certificate is, for clients (curl --cacert). */
  certFile: string;
  certificatePem: string;
  /** A leaf for this DNS name (or IP), issued on first ask and renewed when close to expiry. */
  leafFor(name: string): Leaf;
}

function writeOwnerOnly(file: string, text: string) {
  const fd = fs.openSync(file, 'wx', 0o600);
  try {
    fs.writeSync(fd, text);
  } finally {
    fs.closeSync(fd);
  }
}

/** Loads the CA from the data folder, creating it if absent. */
export function openLocalCa(dataDir: string): LocalCa {
  fs.mkdirSync(dataDir, { recursive: true });
  const certFile = path.join(dataDir, CA_FILE);
  const keyFile = path.join(dataDir, KEY_FILE);
  if (!fs.existsSync(keyFile)) {
    const ca = issueCertificate({ subject: CA_NAME, ca: { pathLength: 0 }, keyUsages: ['key_cert_sign', 'crl_sign'], days: CA_DAYS });
    writeOwnerOnly(keyFile, ca.privateKeyPem);
    fs.rmSync(certFile, { force: true });
    fs.writeFileSync(certFile, ca.certificatePem, { mode: 0o644 });
  }
  const caKey: KeyObject = crypto.createPrivateKey(fs.readFileSync(keyFile));
  const certificatePem = fs.readFileSync(certFile, 'utf8');
  const leafKey = generateKey({ type: 'ecdsa' });
  const leafKeyPem = leafKey.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const leaves = new Map<string, Leaf>();
  return {
    certFile,
    certificatePem,
    leafFor(name) {
      const now = Date.now();
      const kept = leaves.get(name);
      if (kept && kept.notAfter - now > 86_400_000) return kept;
      const ip = /^[\d.]+$|:/.test(name);
      const issued = issueCertificate({
        keyPair: leafKey,
        subject: { commonName: name },
        issuer: { name: CA_NAME, privateKey: caKey },
        ca: false,
        keyUsages: ['digital_signature'],
        extendedKeyUsages: ['server_auth'],
        ...(ip ? { ips: [name] } : { dnsNames: [name] }),
        notBefore: new Date(now - 3_600_000),
        days: LEAF_DAYS,
      });
      const leaf = { certificatePem: issued.certificatePem + certificatePem, privateKeyPem: leafKeyPem, notAfter: now + LEAF_DAYS * 86_400_000 - 3_600_000 };
      leaves.delete(name);
      leaves.set(name, leaf);
      if (leaves.size > MAX_LEAVES) leaves.delete(leaves.keys().next().value!);
      return leaf;
    },
  };
}
