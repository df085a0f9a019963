// OpenSSH user certificates, as PROTOCOL.certkeys in the OpenSSH sources describes them:
// the certified key's public fields, then serial, type, key id, principals, validity,
// critical options, extensions, the CA's public key, and the CA's signature over all of it.
import { randomBytes, type KeyObject } from 'node:crypto';
import { authorizedKeyText, publicKeyOf, sshSignature, type SshPublicKey } from './ssh-keys.js';
import { SshWriter } from './ssh-wire.js';

const SSH_CERT_TYPE_USER = 1;

export interface UserCertificateRequest {
  /** The CA's private key. */
  caKey: KeyObject;
  /** The key being certified. */
  subject: SshPublicKey;
  serial: bigint;
  /** Shown by ssh-keygen -L and logged by sshd on login. */
  keyId: string;
  principals: string[];
  validAfter: Date;
  validBefore: Date;
  criticalOptions: Record<string, string>;
  extensions: Record<string, string>;
}

/**
 * Options in lexical order of name, as PROTOCOL.certkeys requires. An empty value is an
 * empty data field (flag extensions); any other value is one string inside the data field,
 * as ssh-keygen writes force-command and source-address.
 */
function options(map: Record<string, string>): Buffer {
  const w = new SshWriter();
  const names = Object.keys(map).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const name of names) {
    const value = map[name];
    w.string(name).string(value === '' ? Buffer.alloc(0) : new SshWriter().string(value).toBuffer());
  }
  return w.toBuffer();
}

const seconds = (d: Date) => BigInt(Math.floor(d.getTime() / 1000));

/** Signs a user certificate; returns it in authorized-keys form. */
export function signUserCertificate(req: UserCertificateRequest): string {
  const algorithm = `${req.subject.algorithm}-cert-v01@openssh.com`;
  // The key's public fields follow its algorithm name in its blob; the certificate names its own type instead.
  const keyFields = req.subject.blob.subarray(4 + Buffer.byteLength(req.subject.algorithm));
  const principals = new SshWriter();
  for (const p of req.principals) principals.string(p);
  const body = new SshWriter()
    .string(algorithm)
    .string(randomBytes(32))
    .raw(keyFields)
    .uint64(req.serial)
    .uint32(SSH_CERT_TYPE_USER)
    .string(req.keyId)
    .string(principals.toBuffer())
    .uint64(seconds(req.validAfter))
    .uint64(seconds(req.validBefore))
    .string(options(req.criticalOptions))
    .string(options(req.extensions))
    .string('')
    .string(publicKeyOf(req.caKey).blob)
    .toBuffer();
  const certificate = new SshWriter().raw(body).string(sshSignature(req.caKey, body)).toBuffer();
  return authorizedKeyText(algorithm, certificate);
}
