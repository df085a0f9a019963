// Behaviour of users, bots, API keys and credentials: ownership rules and tokens.
import { apiKey, botUser, credential, user } from '../../provider/catalog/accounts.js';
import { ApiError } from '../http/errors.js';
import { digestOf, newToken } from '../http/tokens.js';
import { behaviour } from './behaviours.js';
import type { Ctx, Tx } from './context.js';

/** Owner defaults to the caller; naming another owner needs an admin. */
function ownedByCaller(what: string) {
  return {
    prepare({ body, ctx, prior }: { body: Record<string, any>; ctx: Ctx; prior?: unknown }) {
      if (prior) return;
      const owner = body.owner_id ?? ctx.caller.ownerId;
      if (owner !== ctx.caller.ownerId && !ctx.caller.admin) {
        throw new ApiError('ERR_SERVICE_211', `owner_id: only an admin may create ${what} for another owner; omit owner_id to own it yourself`, { field: 'owner_id' });
      }
      return { body: { ...body, owner_id: owner } };
    },
    async created({ id, tx }: { id: string; tx: Tx }) {
      const token = newToken();
      await tx.token.create({ data: { digest: digestOf(token), resourceId: id } });
      return { token };
    },
  };
}

behaviour(apiKey.kind, ownedByCaller('API keys'));
behaviour(credential.kind, ownedByCaller('credentials'));

export interface Authenticated { keyId: string; ownerId: string; admin: boolean; active: boolean }

/** Resolves a bearer token to its key and owner, or undefined. */
export async function authenticate(tx: Tx, token: string): Promise<Authenticated | undefined> {
  const found = await tx.token.findUnique({ where: { digest: digestOf(token) }, include: { resource: true } });
  if (!found || found.resource.kind !== apiKey.kind) return undefined;
  const ownerId = (found.resource.data as { body: { owner_id: string } }).body.owner_id;
  const owner = await tx.resource.findUnique({ where: { id: ownerId } });
  if (!owner) return undefined;
  const data = owner.data as { body: { active?: boolean }; computed: { admin?: boolean } };
  return {
    keyId: found.resourceId,
    ownerId,
    admin: owner.kind === user.kind && data.computed.admin === true,
    active: owner.kind !== botUser.kind || data.body.active !== false,
  };
}
