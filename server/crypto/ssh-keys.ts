// SSH keys on node:crypto: generating a CA key, the OpenSSH public key blob of a key
// (RFC 4253 6.6, RFC 5656 3.1, RFC 8709 4), parsing a public key in authorized-keys form,
// and SSH signatures (RFC 8332 for RSA with SHA-512, RFC 5656 3.1.2, RFC 8709 6).
import { createPublicKey, generateKeyPair, sign, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { SshReader, SshWireError, SshWriter } from './ssh-wire.js';

export type SshKeyType = 'rsa' | 'ecdsa' | 'ed25519';
export type SshCurve = 'p256' | 'p384' | 'p521';

export interface SshPublicKey {
  keyType: SshKeyType;
  /** The key's algorithm name in SSH, e.g. `ecdsa-sha2-nistp256`. */
  algorithm: string;
  /** The public key blob (what authorized-keys files base64-encode). */
  blob: Buffer;
  key: KeyObject;
}

const CURVES = {
  p256: { node: 'prime256v1', ssh: 'nistp256', jwk: 'P-256', hash: 'sha256', bytes: 32 },
  p384: { node: 'secp384r1', ssh: 'nistp384', jwk: 'P-384', hash: 'sha384', bytes: 48 },
  p521: { node: 'secp521r1', ssh: 'nistp521', jwk: 'P-521', hash: 'sha512', bytes: 66 },
} as const;

type Curve = (typeof CURVES)[SshCurve];
const curveBy = (field: 'node' | 'ssh' | 'jwk', value: string | undefined): Curve | undefined => Object.values(CURVES).find((c) => c[field] === value);

/** User keys smaller than this are refused: 2048 bits is today's floor for RSA. */
export const MIN_RSA_BITS = 2048;

const b64url = (s: string) => Buffer.from(s, 'base64url');
const toB64url = (b: Buffer) => b.toString('base64url');

/** Generates a CA key pair; the private key comes back as PKCS#8 PEM for sealing. */
export async function generateSshKey(type: SshKeyType, opts: { keySize?: number; curve?: SshCurve }): Promise<{ privateKeyPem: string; publicKey: SshPublicKey }> {
  const pair = promisify(generateKeyPair);
  const { privateKey } =
    type === 'rsa'
      ? await pair('rsa', { modulusLength: opts.keySize ?? 4096, publicExponent: 0x10001 })
      : type === 'ecdsa'
        ? await pair('ec', { namedCurve: CURVES[opts.curve ?? 'p256'].node })
        : await pair('ed25519', undefined);
  return { privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(), publicKey: publicKeyOf(privateKey) };
}

/** The SSH public key of a node:crypto key (public or private). */
export function publicKeyOf(key: KeyObject): SshPublicKey {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  const jwk = pub.export({ format: 'jwk' });
  const w = new SshWriter();
  switch (pub.asymmetricKeyType) {
    case 'rsa':
      w.string('ssh-rsa').mpint(b64url(jwk.e!)).mpint(b64url(jwk.n!));
      return { keyType: 'rsa', algorithm: 'ssh-rsa', blob: w.toBuffer(), key: pub };
    case 'ec': {
      const curve = curveBy('jwk', jwk.crv);
      if (!curve) throw new Error(`curve ${jwk.crv} has no SSH name`);
      const algorithm = `ecdsa-sha2-${curve.ssh}`;
      const point = Buffer.concat([Buffer.from([4]), b64url(jwk.x!), b64url(jwk.y!)]);
      w.string(algorithm).string(curve.ssh).string(point);
      return { keyType: 'ecdsa', algorithm, blob: w.toBuffer(), key: pub };
    }
    case 'ed25519':
      w.string('ssh-ed25519').string(b64url(jwk.x!));
      return { keyType: 'ed25519', algorithm: 'ssh-ed25519', blob: w.toBuffer(), key: pub };
    default:
      throw new Error(`key type ${pub.asymmetricKeyType} has no SSH form`);
  }
}

/** Authorized-keys text of a key or certificate blob: `<algorithm> <base64>`. */
export const authorizedKeyText = (algorithm: string, blob: Buffer) => `${algorithm} ${blob.toString('base64')}`;

export type ParsedKey = { ok: true; value: SshPublicKey } | { ok: false; message: string };
const refuse = (message: string): ParsedKey => ({ ok: false, message });

const SUPPORTED = 'ssh-rsa, ecdsa-sha2-nistp256, ecdsa-sha2-nistp384, ecdsa-sha2-nistp521 or ssh-ed25519';

/** Parses one public key in authorized-keys form (`<algorithm> <base64> [comment]`). */
export function parseAuthorizedKey(text: string): ParsedKey {
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  if (lines.length !== 1) return refuse(`must be exactly one public key on one line, found ${lines.length} lines`);
  const [algorithm, b64] = lines[0].split(/\s+/);
  if (algorithm.endsWith('-cert-v01@openssh.com')) return refuse('is an SSH certificate; give the public key it certifies instead');
  if (algorithm.startsWith('sk-')) return refuse(`security-key (FIDO) keys (${algorithm}) are not supported; use ${SUPPORTED}`);
  if (!/^(ssh-rsa|ecdsa-sha2-nistp(256|384|521)|ssh-ed25519)$/.test(algorithm)) {
    return refuse(`must start with the key's algorithm (${SUPPORTED}), then its base64 blob; options before the key are not accepted`);
  }
  if (!b64 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) return refuse(`the ${algorithm} key's base64 blob is missing or malformed`);
  const blob = Buffer.from(b64, 'base64');
  try {
    const r = new SshReader(blob);
    const inner = r.text();
    if (inner !== algorithm) return refuse(`the text says ${algorithm} but the blob holds a ${inner} key`);
    let key: KeyObject;
    if (algorithm === 'ssh-rsa') {
      const e = r.mpint();
      const n = r.mpint();
      key = createPublicKey({ key: { kty: 'RSA', e: toB64url(e), n: toB64url(n) }, format: 'jwk' });
      const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
      if (bits < MIN_RSA_BITS) return refuse(`the RSA key has ${bits} bits; at least ${MIN_RSA_BITS} are needed`);
    } else if (algorithm === 'ssh-ed25519') {
      const pk = r.string();
      if (pk.length !== 32) return refuse('the ssh-ed25519 key is not 32 bytes long');
      key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: toB64url(pk) }, format: 'jwk' });
    } else {
      const curve = curveBy('ssh', r.text());
      if (!curve || `ecdsa-sha2-${curve.ssh}` !== algorithm) return refuse(`the ${algorithm} key names another curve`);
      const point = r.string();
      if (point.length !== 1 + 2 * curve.bytes || point[0] !== 4) return refuse(`the ${algorithm} key is not an uncompressed point of ${curve.ssh}`);
      const [x, y] = [point.subarray(1, 1 + curve.bytes), point.subarray(1 + curve.bytes)];
      key = createPublicKey({ key: { kty: 'EC', crv: curve.jwk, x: toB64url(x), y: toB64url(y) }, format: 'jwk' });
    }
    if (!r.done) return refuse(`the ${algorithm} key's blob has trailing bytes`);
    return { ok: true, value: publicKeyOf(key) };
  } catch (e) {
    if (e instanceof SshWireError) return refuse(`the ${algorithm} key's blob is truncated or malformed`);
    return refuse(`the ${algorithm} key is not a valid public key (for ECDSA: a point on the curve)`);
  }
}

/** An SSH signature blob over `data` by a private key: `string(algorithm) string(signature)`. */
export function sshSignature(privateKey: KeyObject, data: Buffer): Buffer {
  const w = new SshWriter();
  switch (privateKey.asymmetricKeyType) {
    case 'rsa':
      // ssh-rsa (SHA-1) signatures are refused by OpenSSH 8.8 and later; SHA-512 is the strongest choice.
      return w.string('rsa-sha2-512').string(sign('sha512', data, privateKey)).toBuffer();
    case 'ec': {
      const curve = curveBy('node', privateKey.asymmetricKeyDetails?.namedCurve);
      if (!curve) throw new Error('unsupported curve');
      const rs = sign(curve.hash, data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
      const inner = new SshWriter().mpint(rs.subarray(0, curve.bytes)).mpint(rs.subarray(curve.bytes)).toBuffer();
      return w.string(`ecdsa-sha2-${curve.ssh}`).string(inner).toBuffer();
    }
    case 'ed25519':
      return w.string('ssh-ed25519').string(sign(null, data, privateKey)).toBuffer();
    default:
      throw new Error(`cannot sign with a ${privateKey.asymmetricKeyType} key`);
  }
}
