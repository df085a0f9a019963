// OpenSSH's own tools as the judge of the server's SSH output: ssh-keygen makes the user
// keys, reads certificates (-L checks the CA signature while parsing) and converts the CA's
// public key to PKCS#8 so node:crypto can verify the signature again with code that shares
// nothing with the server's signing code (Ed25519 keys, which ssh-keygen cannot export,
// are read from their 32 raw bytes).
import { execFileSync } from 'node:child_process';
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type UserKeySpec = { type: 'rsa' | 'ecdsa' | 'ed25519'; bits?: number };

export interface CertificateListing {
  type: string;
  signingCa: string;
  keyId: string;
  serial: string;
  valid: string;
  principals: string[];
  criticalOptions: string[];
  extensions: string[];
}

export class SshTools {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-ssh-'));
  private n = 0;

  write(text: string): string {
    const file = path.join(this.dir, `${++this.n}.pub`);
    fs.writeFileSync(file, `${text}\n`);
    return file;
  }

  private keygen(args: string[]): string {
    // ssh-keygen prints certificate times in local time; UTC makes them RFC 3339 comparable.
    return execFileSync('ssh-keygen', args, { encoding: 'utf8', env: { ...process.env, TZ: 'UTC' }, stdio: ['ignore', 'pipe', 'pipe'] });
  }

  /** A new user key pair; returns the public key line (with a comment, as ssh-keygen writes it). */
  userKey(spec: UserKeySpec): string {
    const file = path.join(this.dir, `${++this.n}-id`);
    this.keygen(['-q', '-t', spec.type, ...(spec.bits ? ['-b', String(spec.bits)] : []), '-N', '', '-C', 'user@example', '-f', file]);
    return fs.readFileSync(`${file}.pub`, 'utf8').trim();
  }

  /** `ssh-keygen -l`: bits, SHA256 fingerprint and type of a public key. */
  fingerprint(publicKey: string): { bits: number; fingerprint: string; type: string } {
    const [bits, fingerprint, ...rest] = this.keygen(['-l', '-f', this.write(publicKey)]).trim().split(/\s+/);
    return { bits: Number(bits), fingerprint, type: rest.at(-1)!.replace(/[()]/g, '') };
  }

  /** `ssh-keygen -L`, which fails on a certificate whose signature does not verify. */
  list(certificate: string): CertificateListing {
    const out = this.keygen(['-L', '-f', this.write(certificate)]);
    const fields: Record<string, string> = {};
    const lists: Record<string, string[]> = {};
    let current = '';
    for (const line of out.split('\n').slice(1)) {
      const header = line.match(/^ {8}(\S[^:]*): ?(.*)$/);
      const item = line.match(/^ {16}(.*)$/);
      if (header) {
        current = header[1];
        fields[current] = header[2].trim();
        lists[current] = [];
      } else if (item) {
        lists[current].push(item[1].trim());
      }
    }
    return {
      type: fields.Type,
      signingCa: fields['Signing CA'],
      keyId: fields['Key ID'],
      serial: fields.Serial,
      valid: fields.Valid,
      principals: lists.Principals,
      criticalOptions: lists['Critical Options'],
      extensions: lists.Extensions,
    };
  }

  /** An RSA or ECDSA public key (authorized-keys form) as SPKI PEM, converted by ssh-keygen. */
  pkcs8(publicKey: string): string {
    return this.keygen(['-e', '-m', 'PKCS8', '-f', this.write(publicKey)]);
  }

  close() {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Reads SSH wire strings from a buffer, independently of the server's reader. */
function wire(buf: Buffer) {
  let p = 0;
  return {
    string(): Buffer {
      const n = buf.readUInt32BE(p);
      const out = buf.subarray(p + 4, p + 4 + n);
      p += 4 + n;
      return out;
    },
    skip(n: number) {
      p += n;
    },
    get offset() {
      return p;
    },
  };
}

/**
 * Verifies an OpenSSH certificate's signature with node:crypto against the CA public key
 * (authorized-keys text), and checks that the certificate names that CA as its signer.
 */
export function verifyCertificate(certificate: string, caPublicKey: string, tools: SshTools): boolean {
  const blob = Buffer.from(certificate.split(' ')[1], 'base64');
  const r = wire(blob);
  const type = r.string().toString();
  r.string(); // nonce
  const keyStrings = type.startsWith('ssh-ed25519') ? 1 : 2; // ed25519: pk; rsa: e, n; ecdsa: curve, Q
  for (let i = 0; i < keyStrings; i++) r.string();
  r.skip(8 + 4); // serial, type
  for (let i = 0; i < 2; i++) r.string(); // key id, principals
  r.skip(16); // valid after, valid before
  for (let i = 0; i < 3; i++) r.string(); // critical options, extensions, reserved
  const signatureKey = r.string();
  const signed = blob.subarray(0, r.offset);
  const sig = wire(r.string());
  const algorithm = sig.string().toString();
  const raw = sig.string();
  if (signatureKey.toString('base64') !== caPublicKey.split(' ')[1]) return false;
  if (algorithm === 'ssh-ed25519') {
    // ssh-keygen cannot export Ed25519 keys to PKCS#8; the key is the blob's 32 bytes (RFC 8709).
    const pk = wire(signatureKey);
    pk.string();
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: pk.string().toString('base64url') }, format: 'jwk' });
    return verify(null, signed, key, raw);
  }
  const key = createPublicKey(tools.pkcs8(caPublicKey));
  if (algorithm === 'rsa-sha2-512') return verify('sha512', signed, key, raw);
  const size = { 'ecdsa-sha2-nistp256': 32, 'ecdsa-sha2-nistp384': 48, 'ecdsa-sha2-nistp521': 66 }[algorithm]!;
  const hash = { 32: 'sha256', 48: 'sha384', 66: 'sha512' }[size]!;
  const rs = wire(raw);
  const pad = (b: Buffer) => Buffer.concat([Buffer.alloc(size), b]).subarray(-size);
  return verify(hash, signed, { key, dsaEncoding: 'ieee-p1363' }, Buffer.concat([pad(rs.string()), pad(rs.string())]));
}

/** An OpenSSH authorized-keys line for a fresh ed25519 key, made in-process (no ssh-keygen). */
export function freshSshPublicKey(comment = 'test@edgeform'): string {
  const raw = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'der' }).subarray(-32);
  const str = (b: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.length);
    return Buffer.concat([len, b]);
  };
  return `ssh-ed25519 ${Buffer.concat([str(Buffer.from('ssh-ed25519')), str(raw)]).toString('base64')} ${comment}`;
}
