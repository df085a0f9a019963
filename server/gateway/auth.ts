// Authenticates an agent by its credential token, like API keys: the token's SHA-256 digest
// is looked up (tokens are stored only as digests; the lookup by a digest of the secret leaks
// nothing about it). SSH sessions authenticate by a public key an SSH credential holds.
import { botUser, credential, SSH_KEY_SCOPE, sshCredential, user } from '../../provider/catalog/accounts.js';
import { sshCertificateAuthority } from '../../provider/catalog/certificates.js';
import type { UserCertificate } from '../crypto/ssh-certificate-read.js';
import { SshReader } from '../crypto/ssh-wire.js';
import { matchCidr, toCidr } from '../policy/ip.js';
import { ApiError } from '../http/errors.js';
import { findTokenHolder, ownerActive } from '../resources/accounts.js';
import type { Tx } from '../resources/context.js';
import { digestOf } from '../http/tokens.js';
import { prismaRows } from '../store/prisma-rows.js';

export interface AgentCredential { credentialId: string; ownerId: string; acl: string[] }

/** The credential a token belongs to, or the ApiError the agent is refused with. */
export async function authenticateAgent(tx: Tx, token: string): Promise<AgentCredential> {
  const found = await findTokenHolder(prismaRows(tx), digestOf(token), credential.kind);
  if (!found) {
    throw new ApiError('ERR_SERVICE_202', 'the authtoken is not the token of a tunnel credential: it is unknown, or its credential was deleted; create one with POST /credentials and pass its token with --authtoken');
  }
  refuseInactiveOwner(found.body.owner_id, found.owner);
  return { credentialId: found.id, ownerId: found.body.owner_id, acl: (found.body.acl as string[] | undefined) ?? [] };
}

/**
 * The SSH credential holding a public key (its algorithm and blob, `sshKeyIdentity`'s form), or
 * undefined for a key no credential holds; throws as authenticateAgent does for its owner.
 */
export async function authenticateSshKey(tx: Tx, identity: string): Promise<AgentCredential | undefined> {
  const key = await tx.uniqueKey.findUnique({ where: { scope_value: { scope: SSH_KEY_SCOPE, value: identity } }, select: { resourceId: true } });
  const row = key && (await tx.resource.findUnique({ where: { id: key.resourceId }, select: { id: true, kind: true, data: true } }));
  if (!row || row.kind !== sshCredential.kind) return undefined;
  const body = (row.data as { body: { owner_id: string; acl?: string[] } }).body;
  await checkOwnerActive(tx, body.owner_id);
  return { credentialId: row.id, ownerId: body.owner_id, acl: body.acl ?? [] };
}

/**
 * An OpenSSH user certificate signed by one of the account's SSH certificate authorities: the
 * session's credential is the CA (its Ref in the session) and it acts for the first principal
 * that is the id of a user or bot of the account. Within its validity window, with
 * permit-port-forwarding, and with its critical options honoured (source-address) or refused
 * (force-command, or one not known). An SSH CA has no acl: every hostname may be bound.
 * Returns the credential or the sentence saying why not.
 */
export async function authenticateSshCertificate(tx: Tx, cert: UserCertificate, clientIp: string, now = Date.now()): Promise<AgentCredential | string> {
  const caText = `${new SshReader(cert.caKeyBlob).text()} ${cert.caKeyBlob.toString('base64')}`;
  const cas = await tx.resource.findMany({ where: { kind: sshCertificateAuthority.kind }, select: { id: true, data: true } });
  const ca = cas.find((c) => (c.data as { computed: { public_key?: string } }).computed.public_key === caText);
  if (!ca) return 'the certificate is not signed by an SSH certificate authority of this server';
  const seconds = BigInt(Math.floor(now / 1000));
  if (seconds < cert.validAfter || seconds >= cert.validBefore) return `the certificate ${JSON.stringify(cert.keyId)} is outside its validity window`;
  if (!('permit-port-forwarding' in cert.extensions)) return 'the certificate does not permit port forwarding (extension permit-port-forwarding)';
  for (const [name, value] of Object.entries(cert.criticalOptions)) {
    if (name !== 'source-address') return `the certificate's critical option ${name} cannot be honoured here`;
    const cidrs = value.split(',').map((c) => c.trim()).filter(Boolean).map((c) => toCidr(c.includes('/') ? c : `${c}/${c.includes(':') ? 128 : 32}`));
    if (!matchCidr(clientIp, cidrs)) return `the certificate allows logins from ${value} only`;
  }
  for (const principal of cert.principals) {
    const owner = await tx.resource.findUnique({ where: { id: principal }, select: { kind: true, data: true } });
    if (!owner || (owner.kind !== user.kind && owner.kind !== botUser.kind)) continue;
    try {
      refuseInactiveOwner(principal, owner);
    } catch (e) {
      return (e as Error).message;
    }
    return { credentialId: ca.id, ownerId: principal, acl: [] };
  }
  return 'no principal of the certificate is the id of a user or bot user of this server (sign it with principals ["usr_…"] or ["bot_…"])';
}

/** Throws when the credential's owner is gone or an inactive bot. */
export async function checkOwnerActive(tx: Tx, ownerId: string) {
  refuseInactiveOwner(ownerId, await tx.resource.findUnique({ where: { id: ownerId } }));
}

function refuseInactiveOwner(ownerId: string, owner: { kind: string; data: unknown } | null) {
  if (!owner) throw new ApiError('ERR_SERVICE_202', 'the credential\'s owner was deleted; create a new credential');
  if (!ownerActive(owner)) {
    throw new ApiError('ERR_SERVICE_203', `the credential belongs to the inactive bot user ${ownerId}; activate the bot (PATCH /bot_users/${ownerId} {"active":true}) or use another credential`);
  }
}
