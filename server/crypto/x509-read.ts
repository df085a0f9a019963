// Reads the parts of an X.509 certificate (RFC 5280) that the API shows and node:crypto
// does not expose as data: names attribute by attribute, validity as dates, the serial,
// and the key usage, extended key usage, subject alternative name and basic constraints
// extensions. Signatures and key matching are node:crypto's job, not this file's.
import { bigIntToIp } from '../../provider/catalog/validate/cidr.js';
import { EXTENDED_KEY_USAGE_OIDS, KEY_USAGE_BITS } from './x509-build.js';
import { bitStringBits, childrenOf, DerError, expectTag, integerHex, isContext, oidText, parseDer, stringOf, TAG, timeOf, type Tlv } from './der-read.js';

export interface NameAttribute {
  oid: string;
  value: string;
}

interface Extension {
  critical: boolean;
  /** The extnValue OCTET STRING's contents (the extension's own DER). */
  value: Buffer;
}

export interface X509Parts {
  version: number;
  /** Lowercase hex of the serial's magnitude, no leading zeros. */
  serial: string;
  issuer: NameAttribute[];
  subject: NameAttribute[];
  notBefore: Date;
  notAfter: Date;
  /** snake_case names of the key usage bits that are set. */
  keyUsages: string[];
  /** snake_case names of extended key usages; unknown ones in dotted OID form. */
  extendedKeyUsages: string[];
  /** DNS names and IP addresses of the subject alternative names (other kinds are not shown). */
  subjectAltNames: { dns_names: string[]; ips: string[] };
  /** Basic constraints say cA: the certificate may sign others. */
  isCA: boolean;
}

type Extensions = Map<string, Extension>;

export const NAME_OID = {
  commonName: '2.5.4.3',
  country: '2.5.4.6',
  locality: '2.5.4.7',
  province: '2.5.4.8',
  organization: '2.5.4.10',
  organizationalUnit: '2.5.4.11',
} as const;

const EXT = {
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  extKeyUsage: '2.5.29.37',
};

/** Key usage names by bit (RFC 5280 4.2.1.3), the vocabulary the builder writes. */
const KEY_USAGE_NAMES = Object.entries(KEY_USAGE_BITS).sort(([, a], [, b]) => a - b).map(([name]) => name);

/** Extended key usages by OID: the builder's, and others seen in the wild; any other OID is shown dotted. */
const EXT_KEY_USAGES: Record<string, string> = {
  ...Object.fromEntries(Object.entries(EXTENDED_KEY_USAGE_OIDS).map(([name, oid]) => [oid, name])),
  '2.5.29.37.0': 'any',
  '1.3.6.1.5.5.7.3.5': 'ipsec_end_system',
  '1.3.6.1.5.5.7.3.6': 'ipsec_tunnel',
  '1.3.6.1.5.5.7.3.7': 'ipsec_user',
  '1.3.6.1.5.5.7.3.17': 'ipsec_ike',
  '1.3.6.1.4.1.311.10.3.3': 'microsoft_server_gated_crypto',
  '2.16.840.1.113730.4.1': 'netscape_server_gated_crypto',
  '1.3.6.1.4.1.311.2.1.22': 'microsoft_commercial_code_signing',
  '1.3.6.1.4.1.311.61.1.1': 'microsoft_kernel_code_signing',
};

function readName(tlv: Tlv): NameAttribute[] {
  const out: NameAttribute[] = [];
  for (const rdn of childrenOf(expectTag(tlv, TAG.SEQUENCE, 'a Name'))) {
    for (const atv of childrenOf(expectTag(rdn, TAG.SET, 'a RelativeDistinguishedName'))) {
      const [type, value] = childrenOf(expectTag(atv, TAG.SEQUENCE, 'an AttributeTypeAndValue'));
      const oid = oidText(expectTag(type, TAG.OID, 'an attribute type').value);
      if (!value) throw new DerError('attribute without a value');
      // Attributes this API does not show may use any type; only the shown ones must be text.
      if (Object.values(NAME_OID).includes(oid as never)) out.push({ oid, value: stringOf(value) });
    }
  }
  return out;
}

function readExtensions(tlv: Tlv): Extensions {
  const out = new Map<string, Extension>();
  for (const ext of childrenOf(expectTag(tlv, TAG.SEQUENCE, 'Extensions'))) {
    const parts = childrenOf(expectTag(ext, TAG.SEQUENCE, 'an Extension'));
    const oid = oidText(expectTag(parts[0], TAG.OID, 'an extension id').value);
    let i = 1;
    let critical = false;
    if (parts[i]?.tag === TAG.BOOLEAN && parts[i].cls === 0) critical = parts[i++].value[0] !== 0;
    const value = expectTag(parts[i], TAG.OCTET_STRING, 'an extension value').value;
    if (out.has(oid)) throw new DerError(`extension ${oid} appears twice`);
    out.set(oid, { critical, value });
  }
  return out;
}

/** Parses a DER certificate; throws DerError when it is not one. */
export function readCertificate(der: Buffer): X509Parts {
  const [tbs] = childrenOf(expectTag(parseDer(der), TAG.SEQUENCE, 'a Certificate'));
  const fields = childrenOf(expectTag(tbs, TAG.SEQUENCE, 'a TBSCertificate'));
  let i = 0;
  let version = 1;
  if (isContext(fields[0], 0)) {
    version = Number.parseInt(integerHex(expectTag(childrenOf(fields[0])[0], TAG.INTEGER, 'a version').value), 16) + 1;
    i++;
  }
  const serial = integerHex(expectTag(fields[i++], TAG.INTEGER, 'a serial number').value);
  i++; // signature algorithm: node:crypto checks signatures
  const issuer = readName(fields[i++]);
  const [notBefore, notAfter] = childrenOf(expectTag(fields[i++], TAG.SEQUENCE, 'a Validity')).map(timeOf);
  if (!notBefore || !notAfter) throw new DerError('Validity needs notBefore and notAfter');
  const subject = readName(fields[i++]);
  i++; // subjectPublicKeyInfo: node:crypto reads the key
  const found = fields.slice(i).find((f) => isContext(f, 3));
  const extensions = found ? readExtensions(childrenOf(found)[0]) : new Map();
  return {
    version,
    serial,
    issuer,
    subject,
    notBefore,
    notAfter,
    keyUsages: keyUsages(extensions),
    extendedKeyUsages: extendedKeyUsages(extensions),
    subjectAltNames: subjectAltNames(extensions),
    isCA: isCertificateAuthority(extensions),
  };
}

/** The first value of a name attribute, or "" when absent. */
export const nameValue = (name: NameAttribute[], oid: string) => name.find((a) => a.oid === oid)?.value ?? '';

function keyUsages(extensions: Extensions): string[] {
  const ext = extensions.get(EXT.keyUsage);
  if (!ext) return [];
  const bits = bitStringBits(expectTag(parseDer(ext.value), TAG.BIT_STRING, 'a KeyUsage').value);
  return KEY_USAGE_NAMES.filter((_, i) => bits[i]);
}

function extendedKeyUsages(extensions: Extensions): string[] {
  const ext = extensions.get(EXT.extKeyUsage);
  if (!ext) return [];
  return childrenOf(expectTag(parseDer(ext.value), TAG.SEQUENCE, 'an ExtKeyUsageSyntax')).map((oid) => {
    const text = oidText(expectTag(oid, TAG.OID, 'a KeyPurposeId').value);
    return EXT_KEY_USAGES[text] ?? text;
  });
}

function subjectAltNames(extensions: Extensions): { dns_names: string[]; ips: string[] } {
  const out = { dns_names: [] as string[], ips: [] as string[] };
  const ext = extensions.get(EXT.subjectAltName);
  if (!ext) return out;
  for (const name of childrenOf(expectTag(parseDer(ext.value), TAG.SEQUENCE, 'a GeneralNames'))) {
    if (isContext(name, 2)) out.dns_names.push(name.value.toString('latin1'));
    else if (isContext(name, 7)) out.ips.push(ipText(name.value));
  }
  return out;
}

function isCertificateAuthority(extensions: Extensions): boolean {
  const ext = extensions.get(EXT.basicConstraints);
  if (!ext) return false;
  const [first] = childrenOf(expectTag(parseDer(ext.value), TAG.SEQUENCE, 'a BasicConstraints'));
  return first?.cls === 0 && first.tag === TAG.BOOLEAN && first.value[0] !== 0;
}

function ipText(bytes: Buffer): string {
  if (bytes.length === 4) return [...bytes].join('.');
  if (bytes.length !== 16) throw new DerError(`an IP address of ${bytes.length} bytes`);
  // RFC 5952 section 5: IPv4-mapped addresses keep their dotted tail.
  if (bytes.subarray(0, 12).equals(Buffer.from('00000000000000000000ffff', 'hex'))) return `::ffff:${[...bytes.subarray(12)].join('.')}`;
  return bigIntToIp(BigInt(`0x${bytes.toString('hex')}`), 6);
}
