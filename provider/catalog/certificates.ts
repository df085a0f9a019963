// X.509 certificate authorities, TLS certificates, SSH certificate authorities and SSH user certificates.
import { z } from 'zod';
import { defineKind } from './define.js';
import { boundedList, boundedMap, cidr, description, ITEM_LIMITS, metadata, refId, replaceable, rfc3339, secret, stable, timestamp } from './fields.js';
import { withTraits } from './traits.js';

const keyUsages = () => z.array(z.string()).describe('snake_case X.509 key usages, e.g. digital_signature, key_cert_sign.');
const extKeyUsages = () => z.array(z.string()).describe('snake_case extended key usages, e.g. server_auth, client_auth.');
const subjectAttr = (attr: string) => z.string().describe(`The first ${attr} of the certificate's subject; "" when absent.`);
/**
 * PEM text as stored: LF line ends, one final newline. `${file:cert.pem}` ends in a newline,
 * a YAML `|-` block or `$(cat cert.pem)` does not; the same certificate must not differ,
 * or a plan replaces it.
 */
const pem = (what: string) =>
  z
    .string()
    .min(1)
    .overwrite((v) => `${v.replace(/\r\n?/g, '\n').trim()}\n`)
    .max(65536)
    .regex(/-----BEGIN [A-Z0-9 ]+-----/, `must be PEM text (${what})`);

export const certificateAuthority = defineKind({
  kind: 'CertificateAuthority',
  type: 'certificate_authority',
  prefix: 'ca',
  path: '/certificate_authorities',
  envelope: 'certificate_authorities',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'An X.509 certificate authority (one CA certificate) that mutual TLS modules trust for client certificates; its subject, validity and usages are read from the certificate.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    ca_pem: replaceable(pem('one CA certificate').describe('One CA certificate (basic constraints CA:TRUE), PEM.')),
  },
  // Read from the certificate or key, which cannot change in place.
  computed: stable({
    subject_common_name: subjectAttr('CN'),
    not_before: timestamp(),
    not_after: timestamp(),
    key_usages: keyUsages(),
    extended_key_usages: extKeyUsages(),
  }),
});

export const tlsCertificate = defineKind({
  kind: 'TLSCertificate',
  type: 'tls_certificate',
  prefix: 'cert',
  path: '/tls_certificates',
  envelope: 'tls_certificates',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: "An uploaded TLS certificate chain (leaf first) and the leaf's private key; the server checks that the key matches and the chain chains, shows the leaf's parsed fields, and keeps the key encrypted, never returned.",
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    certificate_pem: replaceable(pem('a certificate chain, leaf first').describe('Certificate chain, PEM, leaf first.')),
    private_key_pem: replaceable(secret(pem('the private key of the leaf'), 'omit').describe('Private key of the leaf, PEM (PKCS#1, PKCS#8 or SEC1). Never returned.')),
  },
  // Read from the certificate or key, which cannot change in place.
  computed: stable({
    subject_common_name: subjectAttr('CN'),
    subject_alternative_names: z
      .object({ dns_names: z.array(z.string()), ips: z.array(z.string()) })
      .describe("The leaf's DNS names (wildcards as written) and IP addresses (IPv6 in RFC 5952 form)."),
    issued_at: timestamp().nullable().describe('When the server issued the certificate; null for uploads.'),
    not_before: timestamp(),
    not_after: timestamp(),
    key_usages: keyUsages(),
    extended_key_usages: extKeyUsages(),
    private_key_type: z.enum(['rsa', 'ecdsa', 'ed25519']).describe('Type of the private key: rsa, ecdsa or ed25519.'),
    issuer_common_name: z.string().describe("The CN of the leaf's issuer; \"\" when absent."),
    serial_number: z.string().describe("The leaf's serial number, lowercase hex without leading zeros."),
    subject_organization: subjectAttr('O'),
    subject_organizational_unit: subjectAttr('OU'),
    subject_locality: subjectAttr('L'),
    subject_province: subjectAttr('ST'),
    subject_country: subjectAttr('C'),
  }),
});

export const SSH_KEY_TYPES = ['rsa', 'ecdsa', 'ed25519'] as const;
export const SSH_CURVES = ['p256', 'p384', 'p521'] as const;

export const sshCertificateAuthority = defineKind({
  kind: 'SSHCertificateAuthority',
  type: 'ssh_certificate_authority',
  prefix: 'sshca',
  path: '/ssh_certificate_authorities',
  envelope: 'ssh_certificate_authorities',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'An SSH certificate authority whose key (rsa 2048/4096, ecdsa p256/p384/p521 or ed25519) the server generates and keeps encrypted, never returned; it signs SSH user certificates.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    private_key_type: replaceable(z.enum(SSH_KEY_TYPES).describe('rsa, ecdsa or ed25519.')),
    elliptic_curve: replaceable(z.enum(SSH_CURVES).optional().describe('ecdsa only: p256 (default), p384 or p521.')),
    key_size: replaceable(z.number().int().optional().describe('rsa only: 2048 or 4096 (default).')),
  },
  refine: (doc, ctx) => {
    if (doc.elliptic_curve !== undefined && doc.private_key_type !== 'ecdsa') {
      ctx.addIssue({ code: 'custom', path: ['elliptic_curve'], message: `elliptic_curve applies only to ecdsa keys, not ${doc.private_key_type}` });
    }
    if (doc.key_size !== undefined && doc.private_key_type !== 'rsa') {
      ctx.addIssue({ code: 'custom', path: ['key_size'], message: `key_size applies only to rsa keys, not ${doc.private_key_type}` });
    } else if (doc.key_size !== undefined && doc.key_size !== 2048 && doc.key_size !== 4096) {
      ctx.addIssue({ code: 'custom', path: ['key_size'], message: 'key_size must be 2048 or 4096' });
    }
  },
  normalize: (doc) => ({
    ...doc,
    ...(doc.private_key_type === 'ecdsa' ? { elliptic_curve: doc.elliptic_curve ?? 'p256' } : {}),
    ...(doc.private_key_type === 'rsa' ? { key_size: doc.key_size ?? 4096 } : {}),
  }),
  // Read from the certificate or key, which cannot change in place.
  computed: stable({
    public_key: z.string().describe('The public key, OpenSSH authorized-keys form.'),
    key_type: z.enum(SSH_KEY_TYPES).describe('Type of the key: rsa, ecdsa or ed25519.'),
  }),
});

const CRITICAL_OPTIONS = ['force-command', 'source-address'];
/** Extensions OpenSSH defines (PROTOCOL.certkeys); each is a flag with empty data. */
const FLAG_EXTENSIONS = ['no-touch-required', 'permit-X11-forwarding', 'permit-agent-forwarding', 'permit-port-forwarding', 'permit-pty', 'permit-user-rc'];

export const sshUserCertificate = defineKind({
  kind: 'SSHUserCertificate',
  type: 'ssh_user_certificate',
  prefix: 'sucrt',
  path: '/ssh_user_certificates',
  envelope: 'ssh_user_certificates',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'An OpenSSH user certificate for a public key, signed by an SSH certificate authority: principals, validity window (default 24 hours), critical options and extensions.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    ssh_certificate_authority_id: refId(['SSHCertificateAuthority'], { onDelete: 'keep', replace: true }).describe('The authority that signs it.'),
    // Trimmed: `${file:id.pub}` ends in a newline that is no part of the key (else a replacement).
    public_key: replaceable(z.string().trim().min(1).max(16384).describe('Public key to sign, authorized-keys form (ssh-rsa of at least 2048 bits, ecdsa-sha2-nistp256/384/521 or ssh-ed25519).')),
    principals: replaceable(boundedList(z.string().min(1).max(255), ITEM_LIMITS.strings).default([]).describe('User names the holder may log in as; empty means any.')),
    critical_options: replaceable(
      boundedMap(ITEM_LIMITS.sshOptions)
        .default({})
        .superRefine((m, ctx) => {
          for (const [k, v] of Object.entries(m)) {
            if (!CRITICAL_OPTIONS.includes(k)) {
              ctx.addIssue({ code: 'custom', path: [k], message: `unknown critical option "${k}"; supported: ${CRITICAL_OPTIONS.join(', ')}` });
            } else if (v === '') {
              ctx.addIssue({ code: 'custom', path: [k], message: `${k} needs a value` });
            } else if (k === 'source-address') {
              for (const part of v.split(',')) {
                const r = cidr().safeParse(part.trim());
                if (!r.success) ctx.addIssue({ code: 'custom', path: [k], message: `source-address: ${r.error.issues[0].message}` });
              }
            }
          }
        })
        .describe('Critical options: force-command (the command to run) and source-address (comma-separated addresses or CIDRs); no others.'),
    ),
    extensions: replaceable(
      boundedMap(ITEM_LIMITS.sshOptions)
        .default({ 'permit-pty': '', 'permit-user-rc': '' })
        .superRefine((m, ctx) => {
          for (const [k, v] of Object.entries(m)) {
            if (!/^[\x21-\x7e]+$/.test(k)) {
              ctx.addIssue({ code: 'custom', path: [k], message: `extension name "${k}" must be printable ASCII without spaces` });
            } else if (FLAG_EXTENSIONS.includes(k) && v !== '') {
              ctx.addIssue({ code: 'custom', path: [k], message: `${k} is a flag: its value must be the empty string` });
            }
          }
        })
        .describe(`Certificate extensions, name to value; default permit-pty and permit-user-rc. The OpenSSH flags (${FLAG_EXTENSIONS.join(', ')}) take the empty string.`),
    ),
    valid_after: withTraits(rfc3339().optional(), { replace: true, serverDefault: true }).describe('Start of validity; default the creation time.'),
    valid_until: withTraits(rfc3339().optional(), { replace: true, serverDefault: true }).describe("End of validity (the certificate's valid_before); default 24 hours after creation."),
  },
  refine: (doc, ctx) => {
    if (doc.valid_after && doc.valid_until && Date.parse(doc.valid_until) <= Date.parse(doc.valid_after)) {
      ctx.addIssue({ code: 'custom', path: ['valid_until'], message: 'valid_until must be after valid_after' });
    }
  },
  // Read from the certificate or key, which cannot change in place.
  computed: stable({
    key_type: z.enum(SSH_KEY_TYPES).describe('Type of the certified public key: rsa, ecdsa or ed25519.'),
    certificate: z.string().describe('The signed certificate, authorized-keys form.'),
  }),
});
