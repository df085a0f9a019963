// The ingress's own certificate authority, for names no uploaded or ACME certificate covers
// (like mkcert): one per database, so every instance on it serves certificates from one
// chain. Its certificate and key are kept in the database (the Setting row `sealed:ingress_ca`),
// sealed under the secret key, made by the first instance to start with an ingress (from the
// data folder's ingress-ca.pem and ingress-ca-key.pem when an earlier version left them
// there, so clients keep trusting it); its certificate is written to <data>/ingress-ca.pem
// for clients to trust. Leaf certificates share one key made at start (a name costs one
// ECDSA signature, not a key generation) and are kept for a bounded number of names.
import { sealedSetting } from '../store/sealed-settings.js';
import type { KeyObject } from 'node:crypto';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { generateKey, issueCertificate, type DistinguishedName } from '../crypto/x509-build.js';
import type { ServerContext } from '../resources/context.js';

export const CA_FILE = 'ingress-ca.pem';
/** Where an earlier version kept the CA's key (read once, to move it into the database). */
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

/** A sealed setting (`sealed:ingress_ca`): a key rotation re-seals it with every other secret. */
const SETTING = 'ingress_ca';

/**
 * The CA's certificate and key as the database keeps them (a sealed setting, which a key
 * rotation re-seals), made once per database; of instances starting at once, the first to
 * write wins and the others read its CA.
 */
async function storedCa(dataDir: string, ctx: Pick<ServerContext, 'db' | 'box'>): Promise<{ cert: string; key: string }> {
  const { value } = await sealedSetting(ctx.db, ctx.box, SETTING, () => {
    const legacyKey = path.join(dataDir, KEY_FILE);
    const legacyCert = path.join(dataDir, CA_FILE);
    // An earlier version's CA in the data folder is kept: its clients already trust it.
    if (fs.existsSync(legacyKey) && fs.existsSync(legacyCert)) return JSON.stringify({ cert: fs.readFileSync(legacyCert, 'utf8'), key: fs.readFileSync(legacyKey, 'utf8') });
    const ca = issueCertificate({ subject: CA_NAME, ca: { pathLength: 0 }, keyUsages: ['key_cert_sign', 'crl_sign'], days: CA_DAYS });
    return JSON.stringify({ cert: ca.certificatePem, key: ca.privateKeyPem });
  });
  return JSON.parse(value) as { cert: string; key: string };
}

/** Loads the CA from the database, creating it if absent, and writes its certificate to the data folder. */
export async function openLocalCa(dataDir: string, ctx: Pick<ServerContext, 'db' | 'box'>): Promise<LocalCa> {
  fs.mkdirSync(dataDir, { recursive: true });
  const certFile = path.join(dataDir, CA_FILE);
  const stored = await storedCa(dataDir, ctx);
  const caKey: KeyObject = crypto.createPrivateKey(stored.key);
  const certificatePem = stored.cert;
  if (!fs.existsSync(certFile) || fs.readFileSync(certFile, 'utf8') !== certificatePem) {
    fs.rmSync(certFile, { force: true });
    fs.writeFileSync(certFile, certificatePem, { mode: 0o644 });
  }
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
