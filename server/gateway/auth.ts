// Authenticates an agent by its credential token, like API keys: the token's SHA-256 digest
// is looked up (tokens are stored only as digests; the lookup by a digest of the secret leaks
// nothing about it, and digestMatches confirms in constant time).
import { botUser, credential } from '../../provider/catalog/accounts.js';
import { ApiError } from '../http/errors.js';
import { digestMatches, digestOf } from '../http/tokens.js';
import type { Tx } from '../resources/context.js';

export interface AgentCredential { credentialId: string; ownerId: string; acl: string[] }

/** The credential a token belongs to, or the ApiError the agent is refused with. */
export async function authenticateAgent(tx: Tx, token: string): Promise<AgentCredential> {
  const found = await tx.token.findUnique({ where: { digest: digestOf(token) }, include: { resource: true } });
  if (!found || !digestMatches(token, found.digest) || found.resource.kind !== credential.kind) {
    throw new ApiError('ERR_SERVICE_202', 'the authtoken is not the token of a tunnel credential: it is unknown, or its credential was deleted; create one with POST /credentials and pass its token with --authtoken');
  }
  const body = (found.resource.data as { body: { owner_id: string; acl?: string[] } }).body;
  await checkOwnerActive(tx, body.owner_id);
  return { credentialId: found.resourceId, ownerId: body.owner_id, acl: body.acl ?? [] };
}

/** Throws when the credential's owner is gone or an inactive bot. */
export async function checkOwnerActive(tx: Tx, ownerId: string) {
  const owner = await tx.resource.findUnique({ where: { id: ownerId } });
  if (!owner) throw new ApiError('ERR_SERVICE_202', 'the credential\'s owner was deleted; create a new credential');
  if (owner.kind === botUser.kind && (owner.data as { body: { active?: boolean } }).body.active === false) {
    throw new ApiError('ERR_SERVICE_203', `the credential belongs to the inactive bot user ${ownerId}; activate the bot (PATCH /bot_users/${ownerId} {"active":true}) or use another credential`);
  }
}
