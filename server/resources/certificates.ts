// Certificates with real cryptography: X.509 CAs and TLS uploads are parsed and checked,
// SSH CA keys are generated, SSH user certificates are signed. Everything is computed once,
// on create (PATCH changes only description and metadata); private keys live only in the
// sealed part of the row, which the engine encrypts with the server key.
import { createPrivateKey, randomBytes } from 'node:crypto';
import { certificateAuthority, sshCertificateAuthority, sshUserCertificate, tlsCertificate } from '../../provider/catalog/certificates.js';
import { inspectCaCertificate, inspectTlsUpload, type Checked, type CertificateFields } from '../crypto/certificate-chain.js';
import { signUserCertificate } from '../crypto/ssh-certificate.js';
import { authorizedKeyText, generateSshKey, parseAuthorizedKey } from '../crypto/ssh-keys.js';
import { rfc3339 } from '../events/outbox.js';
import { ApiError, invalid } from '../http/errors.js';
import { behaviour, type Doc } from './behaviours.js';
import type { Ctx } from './context.js';
import { findStored } from './engine.js';

/** SPEC: an SSH user certificate is valid for 24 hours after its creation unless valid_until says otherwise. */
const DEFAULT_SSH_VALIDITY_MS = 24 * 60 * 60 * 1000;

function checked<T>(r: Checked<T>): T {
  if (!r.ok) throw invalid(r.field, r.message);
  return r.value;
}

const certificateRead = (f: CertificateFields) => ({ ...f, not_before: rfc3339(f.not_before), not_after: rfc3339(f.not_after) });

behaviour(certificateAuthority.kind, {
  prepare({ body, prior }) {
    if (prior) return;
    return { computed: certificateRead(checked(inspectCaCertificate(body.ca_pem))) };
  },
});

/** A write of a certificate the server issued (ingress/acme) carries when; an upload has none. */
export type IssuingCtx = Ctx & { issuedAt?: Date };

behaviour(tlsCertificate.kind, {
  prepare({ body, prior, ctx }) {
    const issuedAt = (ctx as IssuingCtx).issuedAt;
    // A PATCH changes only description and metadata; a renewal (issuedAt) replaces the chain.
    if (prior && !issuedAt) return;
    const fields = checked(inspectTlsUpload(body.certificate_pem, body.private_key_pem));
    // SPEC: issued_at is when the server issued it, null for uploads.
    return { computed: { ...certificateRead(fields), issued_at: issuedAt ? rfc3339(issuedAt) : null } };
  },
});

behaviour(sshCertificateAuthority.kind, {
  async prepare({ body, prior }) {
    if (prior) return;
    const { privateKeyPem, publicKey } = await generateSshKey(body.private_key_type, { keySize: body.key_size, curve: body.elliptic_curve });
    return {
      computed: { public_key: authorizedKeyText(publicKey.algorithm, publicKey.blob), key_type: publicKey.keyType },
      internal: { private_key_pem: privateKeyPem },
    };
  },
});

/** valid_after defaults to now and valid_until to 24 hours after creation, both in whole seconds. */
function validity(body: Doc, now: Date): { valid_after: string; valid_until: string } {
  const created = Math.floor(now.getTime() / 1000) * 1000;
  const validAfter = body.valid_after ?? rfc3339(new Date(created));
  const validUntil = body.valid_until ?? rfc3339(new Date(created + DEFAULT_SSH_VALIDITY_MS));
  if (Date.parse(validAfter) < 0) throw invalid('valid_after', 'must not be before 1970-01-01T00:00:00Z (SSH certificates count seconds from then)');
  if (Date.parse(validUntil) <= Date.parse(validAfter)) {
    const why = body.valid_until === undefined ? `defaults to 24 hours after creation (${validUntil}), which` : 'must be after valid_after; it';
    throw invalid('valid_until', `${why} is not after valid_after (${validAfter}); set valid_until explicitly`);
  }
  return { valid_after: validAfter, valid_until: validUntil };
}

behaviour(sshUserCertificate.kind, {
  async prepare({ id, body, prior, ctx }) {
    if (prior) return;
    const subject = parseAuthorizedKey(body.public_key);
    if (!subject.ok) throw invalid('public_key', subject.message);
    const caId: string = body.ssh_certificate_authority_id;
    const ca = await findStored(ctx, caId);
    if (!ca || ca.kind !== sshCertificateAuthority.kind) {
      throw new ApiError('ERR_SERVICE_107', `ssh_certificate_authority_id: SSH certificate authority ${caId} does not exist`, { field: 'ssh_certificate_authority_id', id: caId });
    }
    const window = validity(body, new Date());
    const certificate = signUserCertificate({
      caKey: createPrivateKey(ca.internal.private_key_pem),
      subject: subject.value,
      serial: randomBytes(8).readBigUInt64BE(),
      // sshd logs the key id on every login: the resource id leads straight back here.
      keyId: id,
      principals: body.principals,
      validAfter: new Date(window.valid_after),
      validBefore: new Date(window.valid_until),
      criticalOptions: body.critical_options,
      extensions: body.extensions,
    });
    return { body: { ...body, ...window }, computed: { key_type: subject.value.keyType, certificate } };
  },
});
