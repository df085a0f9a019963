// Who may use the channel between instances: whoever holds the server's secret key. A
// certificate authority is derived from it (an Ed25519 key from HKDF of the secret key, and
// a certificate whose every field is fixed, so every instance builds the same bytes), and
// each instance issues itself a leaf under it at start. The peer listener asks every client
// for a certificate and accepts only leaves of that authority (mutual TLS 1.3); a client
// accepts only a server that shows one. A connection without such a certificate fails in its
// handshake, before a byte of HTTP/2 is read. Rotating the secret key changes the authority:
// instances on different keys do not reach each other until all run on the new one.
import crypto from 'node:crypto';
import { buildCertificate, generateKey, pemOf } from '../../crypto/x509-build.js';
import type { SecretBox } from '../../store/secret-box.js';

export interface PeerCredentials {
  /** The derived authority's certificate (the same bytes on every instance on this key). */
  caPem: string;
  /** This instance's leaf, for both ends of its connections. */
  certPem: string;
  keyPem: string;
}

const CA_NAME = { organization: 'edgeform', commonName: 'edgeform peer CA' };
/** PKCS#8 for an Ed25519 private key, less its 32-byte seed (RFC 8410). */
const ED25519_PKCS8 = Buffer.from('302e020100300506032b657004220420', 'hex');
const LEAF_DAYS = 365;

export function peerCredentials(box: Pick<SecretBox, 'derive'>, instanceId: string): PeerCredentials {
  const caKey = crypto.createPrivateKey({ key: Buffer.concat([ED25519_PKCS8, box.derive('peer ca')]), format: 'der', type: 'pkcs8' });
  const caPublic = crypto.createPublicKey(caKey);
  // Fixed serial and dates, and Ed25519 signs deterministically: the same certificate everywhere.
  const caPem = pemOf(buildCertificate({
    subject: CA_NAME, publicKey: caPublic, signingKey: caKey, serialNumber: Buffer.from([1]),
    notBefore: new Date('2020-01-01T00:00:00Z'), notAfter: new Date('2120-01-01T00:00:00Z'),
    ca: { pathLength: 0 }, keyUsages: ['key_cert_sign', 'crl_sign'],
  }));
  const leaf = generateKey({ type: 'ecdsa' });
  const now = Date.now();
  const certPem = pemOf(buildCertificate({
    subject: { organization: 'edgeform', commonName: `edgeform instance ${instanceId}` }, issuer: CA_NAME,
    publicKey: leaf.publicKey, signingKey: caKey,
    notBefore: new Date(now - 3600_000), notAfter: new Date(now + LEAF_DAYS * 86_400_000),
    keyUsages: ['digital_signature'], extendedKeyUsages: ['server_auth', 'client_auth'],
  }));
  return { caPem, certPem, keyPem: leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}
