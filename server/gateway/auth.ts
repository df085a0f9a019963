// Authenticates an agent by its credential token, like API keys: the token's SHA-256 digest
// is looked up (tokens are stored only as digests; the lookup by a digest of the secret leaks
// nothing about it).
import { credential } from '../../provider/catalog/accounts.js';
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
