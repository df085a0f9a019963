// Reading an OpenSSH user certificate (PROTOCOL.certkeys), the other half of ssh-certificate.ts:
// what an `ssh` client presents when it logs in with `id_*-cert.pub`. Parsed field by field,
// the CA's signature checked with node:crypto over the bytes it covers, and the certified key
// given back as a plain public key blob so the login's own signature can be checked with it.
import { verify, type KeyObject } from 'node:crypto';
import { parseAuthorizedKey } from './ssh-keys.js';
import { SshReader, SshWireError, SshWriter } from './ssh-wire.js';

export interface UserCertificate {
  /** The certified key's algorithm (`ssh-ed25519`) and its plain public key blob. */
  keyAlgorithm: string;
  keyBlob: Buffer;
  serial: bigint;
  keyId: string;
  principals: string[];
  /** Seconds since the epoch; validBefore 0xffffffffffffffff is "forever". */
  validAfter: bigint;
  validBefore: bigint;
  criticalOptions: Record<string, string>;
  extensions: Record<string, string>;
  /** The signing CA's public key blob. */
  caKeyBlob: Buffer;
}

export type ReadCertificate = { ok: true; value: UserCertificate } | { ok: false; message: string };

const SSH_CERT_TYPE_USER = 1;

/** The public fields after the nonce, per key type: how many strings (mpints are strings too). */
const KEY_FIELDS: Record<string, number> = {
  'ssh-ed25519': 1,
  'ssh-rsa': 2,
  'ecdsa-sha2-nistp256': 2,
  'ecdsa-sha2-nistp384': 2,
  'ecdsa-sha2-nistp521': 2,
};

function options(data: Buffer): Record<string, string> {
  const r = new SshReader(data);
  const out: Record<string, string> = {};
  while (!r.done) {
    const name = r.text();
    const value = r.string();
    out[name] = value.length ? new SshReader(value).text() : '';
  }
  return out;
}

/** Parses a user certificate blob and checks its CA signature; does not check validity or principals. */
export function readUserCertificate(blob: Buffer): ReadCertificate {
  try {
    const r = new SshReader(blob);
    const certAlgorithm = r.text();
    const keyAlgorithm = certAlgorithm.replace(/-cert-v01@openssh\.com$/, '');
    const fields = KEY_FIELDS[keyAlgorithm];
    if (!fields || keyAlgorithm === certAlgorithm) return { ok: false, message: `certificates of type ${certAlgorithm} are not supported` };
    r.string(); // nonce
    const key = new SshWriter().string(keyAlgorithm);
    for (let i = 0; i < fields; i++) key.string(r.string());
    const serial = r.uint64();
    if (r.uint32() !== SSH_CERT_TYPE_USER) return { ok: false, message: 'a host certificate cannot log in' };
    const keyId = r.text();
    const principalData = new SshReader(r.string());
    const principals: string[] = [];
    while (!principalData.done) principals.push(principalData.text());
    const validAfter = r.uint64();
    const validBefore = r.uint64();
    const criticalOptions = options(r.string());
    const extensions = options(r.string());
    r.string(); // reserved
    const caKeyBlob = r.string();
    const signed = blob.subarray(0, r.offset);
    const signature = r.string();
    if (!r.done) return { ok: false, message: 'the certificate has trailing bytes' };
    if (!verifySshSignature(caKeyBlob, signed, signature)) return { ok: false, message: 'the certificate\'s CA signature does not verify' };
    return { ok: true, value: { keyAlgorithm, keyBlob: key.toBuffer(), serial, keyId, principals, validAfter, validBefore, criticalOptions, extensions, caKeyBlob } };
  } catch (e) {
    if (e instanceof SshWireError) return { ok: false, message: 'the certificate is truncated or malformed' };
    throw e;
  }
}

/** A public key blob as node:crypto's key (the same checks as an authorized-keys line), or undefined. */
export function keyOfBlob(blob: Buffer): KeyObject | undefined {
  const algorithm = new SshReader(blob).text();
  const parsed = parseAuthorizedKey(`${algorithm} ${blob.toString('base64')}`);
  return parsed.ok ? parsed.value.key : undefined;
}

/** Checks an SSH signature blob (`string algorithm, string signature`) over `data` by the key in `keyBlob`. */
export function verifySshSignature(keyBlob: Buffer, data: Buffer, signatureBlob: Buffer): boolean {
  try {
    const key = keyOfBlob(keyBlob);
    if (!key) return false;
    const s = new SshReader(signatureBlob);
    const algorithm = s.text();
    const sig = s.string();
    switch (algorithm) {
      case 'ssh-ed25519':
        return key.asymmetricKeyType === 'ed25519' && verify(null, data, key, sig);
      case 'rsa-sha2-256':
      case 'rsa-sha2-512':
        return key.asymmetricKeyType === 'rsa' && verify(algorithm === 'rsa-sha2-256' ? 'sha256' : 'sha512', data, key, sig);
      case 'ecdsa-sha2-nistp256':
      case 'ecdsa-sha2-nistp384':
      case 'ecdsa-sha2-nistp521': {
        if (key.asymmetricKeyType !== 'ec') return false;
        const bytes = { 'ecdsa-sha2-nistp256': 32, 'ecdsa-sha2-nistp384': 48, 'ecdsa-sha2-nistp521': 66 }[algorithm];
        const hash = { 'ecdsa-sha2-nistp256': 'sha256', 'ecdsa-sha2-nistp384': 'sha384', 'ecdsa-sha2-nistp521': 'sha512' }[algorithm];
        const rs = new SshReader(sig);
        const pad = (b: Buffer) => (b.length > bytes ? b.subarray(b.length - bytes) : Buffer.concat([Buffer.alloc(bytes - b.length), b]));
        const p1363 = Buffer.concat([pad(rs.mpint()), pad(rs.mpint())]);
        return verify(hash, data, { key, dsaEncoding: 'ieee-p1363' }, p1363);
      }
      default:
        // ssh-rsa (SHA-1) signatures are refused, as OpenSSH 8.8 and later refuse them.
        return false;
    }
  } catch {
    return false;
  }
}
