// The plugin's own TLS certificate for go-plugin's AutoMTLS: terraform trusts exactly the
// certificate printed in the handshake, so each launch makes a fresh self-signed one.
// node:crypto cannot build certificates, so the DER is written here; the fields mirror
// go-plugin's mtls.go (ECDSA P-256, CN and SAN localhost, CA, server+client auth).
import crypto from 'node:crypto';

const len = (n: number) => (n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]));
const tlv = (tag: number, ...content: Buffer[]) => {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
};
const seq = (...items: Buffer[]) => tlv(0x30, ...items);
const oid = (hex: string) => tlv(0x06, Buffer.from(hex, 'hex'));
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s));
const utcTime = (d: Date) => tlv(0x17, Buffer.from(d.toISOString().replace(/\.\d{3}Z$/, 'Z').replace(/[-:T]/g, '').slice(2)));

/**
 * A DER INTEGER from unsigned big-endian bytes, encoded minimally: OpenSSL refuses a
 * redundant leading zero ("illegal padding"), which once broke 1 launch in 250.
 */
export function derUnsigned(bytes: Buffer): Buffer {
  let b = bytes;
  while (b.length > 1 && b[0] === 0) b = b.subarray(1);
  return tlv(0x02, b[0] & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

const OID = {
  ecdsaWithSha256: '2a8648ce3d040302',
  organization: '55040a',
  commonName: '550403',
  basicConstraints: '551d13',
  keyUsage: '551d0f',
  extKeyUsage: '551d25',
  subjectAltName: '551d11',
  clientAuth: '2b06010505070302',
  serverAuth: '2b06010505070301',
};

export interface PluginCert {
  /** PEM certificate and PKCS#8 key, for grpc-js. */
  certPem: string;
  keyPem: string;
  /** The handshake's 6th field: DER, standard base64 without padding (Go's RawStdEncoding). */
  handshakeField: string;
}

export function makePluginCert(now = new Date()): PluginCert {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = seq(
    tlv(0x31, seq(oid(OID.organization), utf8('HashiCorp'))),
    tlv(0x31, seq(oid(OID.commonName), utf8('localhost'))),
  );
  const critical = tlv(0x01, Buffer.from([0xff]));
  // keyUsage bits: digitalSignature, keyEncipherment, keyAgreement, keyCertSign (0xac; its 2 low bits unused).
  const extensions = tlv(0xa3, seq(
    seq(oid(OID.basicConstraints), critical, tlv(0x04, seq(tlv(0x01, Buffer.from([0xff]))))),
    seq(oid(OID.keyUsage), critical, tlv(0x04, tlv(0x03, Buffer.from([0x02, 0xac])))),
    seq(oid(OID.extKeyUsage), tlv(0x04, seq(oid(OID.clientAuth), oid(OID.serverAuth)))),
    seq(oid(OID.subjectAltName), tlv(0x04, seq(tlv(0x82, Buffer.from('localhost'))))),
  ));
  const algorithm = seq(oid(OID.ecdsaWithSha256));
  const tbs = seq(
    tlv(0xa0, derUnsigned(Buffer.from([2]))),
    derUnsigned(crypto.randomBytes(16)),
    algorithm,
    name,
    seq(utcTime(new Date(now.getTime() - 30_000)), utcTime(new Date(now.getTime() + 30 * 24 * 3600_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    extensions,
  );
  const signature = crypto.sign('sha256', tbs, { key: privateKey, dsaEncoding: 'der' });
  const der = seq(tbs, algorithm, tlv(0x03, Buffer.from([0]), signature));
  const b64 = der.toString('base64');
  return {
    certPem: `-----BEGIN CERTIFICATE-----\n${b64.replace(/.{64}/g, '$&\n').replace(/\n?$/, '\n')}-----END CERTIFICATE-----\n`,
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    handshakeField: b64.replace(/=+$/, ''),
  };
}
