// Keys and X.509 certificates made with the openssl command line, so the server's parser
// is checked against an implementation it shares no code with.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type KeySpec = 'rsa2048' | 'rsa3072' | 'p256' | 'p384' | 'p521' | 'ed25519' | 'ed448' | 'secp256k1';

const GENPKEY: Record<KeySpec, string[]> = {
  rsa2048: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'],
  rsa3072: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:3072'],
  p256: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'],
  p384: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384'],
  p521: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-521'],
  ed25519: ['-algorithm', 'ED25519'],
  ed448: ['-algorithm', 'ED448'],
  secp256k1: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:secp256k1'],
};

export interface CertSpec {
  /** Distinguished name attributes in order, e.g. [['C', 'US'], ['CN', 'example.com']]. */
  subject: [string, string][];
  /** subjectAltName entries in openssl syntax: `DNS:example.com`, `IP:10.0.0.1`. */
  sans?: string[];
  keyUsage?: string[];
  extendedKeyUsage?: string[];
  ca?: boolean;
  /** Hex serial without 0x. */
  serial?: string;
}

export interface Issued {
  cert: string;
  key: string;
  /** Paths, for signing further certificates. */
  certFile: string;
  keyFile: string;
}

export class Pki {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-pki-'));
  private n = 0;

  private file(name: string) {
    return path.join(this.dir, `${++this.n}-${name}`);
  }

  openssl(args: string[], input?: string): string {
    return execFileSync('openssl', args, { cwd: this.dir, input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
  }

  key(spec: KeySpec): { pem: string; file: string } {
    const file = this.file('key.pem');
    this.openssl(['genpkey', ...GENPKEY[spec], '-out', file]);
    return { pem: fs.readFileSync(file, 'utf8'), file };
  }

  /** A config with exactly the extensions asked for (openssl adds none of its defaults). */
  private config(spec: CertSpec): string {
    const file = this.file('req.cnf');
    const ext = [
      ...(spec.ca !== undefined ? [`basicConstraints = critical, CA:${spec.ca ? 'TRUE' : 'FALSE'}`] : []),
      ...(spec.keyUsage?.length ? [`keyUsage = ${spec.keyUsage.join(', ')}`] : []),
      ...(spec.extendedKeyUsage?.length ? [`extendedKeyUsage = ${spec.extendedKeyUsage.join(', ')}`] : []),
      ...(spec.sans?.length ? [`subjectAltName = ${spec.sans.join(', ')}`] : []),
    ];
    const dn = spec.subject.map(([k, v], i) => `${i}.${k} = ${v}`);
    fs.writeFileSync(file, ['[req]', 'prompt = no', 'utf8 = yes', 'string_mask = utf8only', 'distinguished_name = dn', 'x509_extensions = ext', '[dn]', ...dn, '[ext]', ...ext, ''].join('\n'));
    return file;
  }

  /** A certificate for a new key of `keySpec`, self-signed or signed by `issuer`. */
  issue(keySpec: KeySpec, spec: CertSpec, issuer?: Issued): Issued {
    const key = this.key(keySpec);
    return this.issueFor(key.file, spec, issuer);
  }

  issueFor(keyFile: string, spec: CertSpec, issuer?: Issued): Issued {
    const cnf = this.config(spec);
    const certFile = this.file('cert.pem');
    const serial = spec.serial ? ['-set_serial', `0x${spec.serial}`] : [];
    if (!issuer) {
      this.openssl(['req', '-new', '-x509', '-config', cnf, '-key', keyFile, '-days', '30', ...serial, '-out', certFile]);
    } else {
      const csr = this.file('req.csr');
      this.openssl(['req', '-new', '-config', cnf, '-key', keyFile, '-out', csr]);
      this.openssl(['x509', '-req', '-in', csr, '-CA', issuer.certFile, '-CAkey', issuer.keyFile, '-days', '30', ...(serial.length ? serial : ['-CAcreateserial']), '-extfile', cnf, '-extensions', 'ext', '-out', certFile]);
    }
    return { cert: fs.readFileSync(certFile, 'utf8'), key: fs.readFileSync(keyFile, 'utf8'), certFile, keyFile };
  }

  /** What openssl says of a certificate's validity, as RFC 3339. */
  dates(cert: Issued): { not_before: string; not_after: string } {
    const out = this.openssl(['x509', '-noout', '-startdate', '-enddate', '-in', cert.certFile]);
    const at = (name: string) => new Date(out.match(new RegExp(`${name}=(.*)`))![1]).toISOString().replace(/\.\d{3}Z$/, 'Z');
    return { not_before: at('notBefore'), not_after: at('notAfter') };
  }

  /** openssl's serial, as lowercase hex without leading zeros. */
  serial(cert: Issued): string {
    const hex = this.openssl(['x509', '-noout', '-serial', '-in', cert.certFile]).trim().replace(/^serial=/, '');
    return BigInt(`0x${hex}`).toString(16);
  }

  close() {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
