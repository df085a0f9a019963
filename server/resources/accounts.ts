// Behaviour of users, bots, API keys and credentials: ownership rules and tokens.
import { apiKey, botUser, credential, sshCredential, user } from '../../provider/catalog/accounts.js';
import { parseAuthorizedKey } from '../crypto/ssh-keys.js';
import { ApiError, invalid } from '../http/errors.js';
import { digestOf, newToken } from '../http/tokens.js';
import { behaviour, type StoredResource } from './behaviours.js';
import type { Writes } from '../store/hot-writes.js';
import type { TokenRows } from '../store/hot-reads.js';
import type { Ctx, ServerContext } from './context.js';

/**
 * The permission rule for owned things (docs/api.md, "Permissions"): anyone may read them; only
 * their owner or an admin may change or delete them, so a bot's key cannot touch what others own.
 */
function refuseUnlessOwner(ctx: Ctx, ownerId: unknown, what: string, verb: string) {
  if (ctx.caller.admin || ownerId === ctx.caller.ownerId) return;
  throw new ApiError('ERR_SERVICE_211', `only an admin or the owner may ${verb} ${what} owned by ${ownerId}; this key belongs to ${ctx.caller.ownerId}`, { owner_id: ownerId });
}

/** Owner defaults to the caller; naming another owner needs an admin. */
function ownedByCaller(what: string) {
  return {
    prepare({ body, ctx, prior }: { body: Record<string, any>; ctx: Ctx; prior?: StoredResource }) {
      if (prior) return refuseUnlessOwner(ctx, prior.body.owner_id, what, 'change');
      const owner = body.owner_id ?? ctx.caller.ownerId;
      if (owner !== ctx.caller.ownerId && !ctx.caller.admin) {
        throw new ApiError('ERR_SERVICE_211', `owner_id: only an admin may create ${what} for another owner; omit owner_id to own it yourself`, { field: 'owner_id' });
      }
      return { body: { ...body, owner_id: owner } };
    },
    async created({ id, tx }: { id: string; tx: Writes }) {
      const token = newToken();
      await tx.insertToken(digestOf(token), id);
      return { token };
    },
    deleting({ row, ctx }: { row: StoredResource; ctx: Ctx }) {
      refuseUnlessOwner(ctx, row.body.owner_id, what, 'delete');
    },
  };
}

// Without a key of the admin user nobody can name another owner, manage bots or recover, and
// no restart brings one back (the bootstrap runs only on an empty database): keep the last one.
async function keepLastAdminKey({ row, tx }: { row: StoredResource; ctx: Ctx; tx: Writes }) {
    const ownerId = row.body.owner_id as string;
    // Two deletes of the admin's last two keys queue here (NO KEY UPDATE conflicts with itself,
    // not with the KEY SHARE every write of the caller holds), so the second sees the first.
    const [owner] = await tx.lock([ownerId], 'NO KEY UPDATE');
    if (owner?.kind !== user.kind || (owner.data as { computed: { admin?: boolean } }).computed.admin !== true) return;
    const keys = await tx.countReferrers(ownerId, 'owner_id', apiKey.kind);
    if (keys <= 1) {
      throw new ApiError('ERR_SERVICE_327', `API key ${row.id} is the last key of the admin user ${ownerId}; create another key for the admin user first (POST /api_keys), or use "edgeform admin create-key" on the server's machine`, { id: row.id, owner_id: ownerId });
    }
}

const keys = ownedByCaller('API keys');
behaviour(apiKey.kind, {
  ...keys,
  guardsCallers: true,
  async deleting(args) {
    keys.deleting(args);
    await keepLastAdminKey(args);
  },
});
behaviour(credential.kind, { ...ownedByCaller('credentials'), guardsCallers: true });

// An SSH credential is a tunnel credential whose secret is the client's private key: the same
// ownership rules, no token; the key is checked (and must be unique, the catalog's trait) on create.
const sshCredentials = ownedByCaller('SSH credentials');
behaviour(sshCredential.kind, {
  prepare(args) {
    if (!args.prior) {
      const key = parseAuthorizedKey(args.body.public_key);
      if (!key.ok) throw invalid('public_key', key.message);
    }
    return sshCredentials.prepare(args);
  },
  deleting: sshCredentials.deleting,
  guardsCallers: true,
});
behaviour(user.kind, { guardsCallers: true });

// Bots own keys and credentials; creating, changing or deleting one (re-activating a
// deactivated bot included) is an admin's job, or any bot's key could undo the others.
const adminsOnly = (verb: string) => (ctx: Ctx) => {
  if (!ctx.caller.admin) throw new ApiError('ERR_SERVICE_211', `only a key of the admin user may ${verb} bot users; this key belongs to ${ctx.caller.ownerId}`);
};
behaviour(botUser.kind, {
  guardsCallers: true,
  prepare: ({ ctx, prior }) => adminsOnly(prior ? 'change' : 'create')(ctx),
  deleting: ({ ctx }) => adminsOnly('delete')(ctx),
});

export interface Authenticated { keyId: string; ownerId: string; admin: boolean; active: boolean }

type OwnerRow = { kind: string; data: unknown };

/** Whether an owner's tokens work: a user's always do, a bot's while it is active. */
export const ownerActive = (owner: OwnerRow) => owner.kind !== botUser.kind || (owner.data as { body: { active?: boolean } }).body.active !== false;

/**
 * The resource of `kind` (an API key or a credential) holding the token with this SHA-256
 * digest, with its body and its owner's row (null when the owner is gone); undefined for an
 * unknown token. For API keys and agents' credentials alike. The database compares digests,
 * not tokens: how long a comparison takes can tell only about the digest, from which nothing
 * about the token follows.
 */
export async function findTokenHolder(rows: TokenRows, digest: string, kind: string) {
  const holder = await rows.tokenHolder(digest);
  if (!holder || holder.kind !== kind) return undefined;
  const body = (holder.data as { body: Record<string, unknown> & { owner_id: string } }).body;
  const owner = (await rows.resource(body.owner_id)) ?? null;
  return { id: holder.id, body, owner };
}

const CHALLENGE = { 'WWW-Authenticate': 'Bearer' };
/** The 401s of a key that does not (or no longer) authenticate, at the door and inside a write alike. */
export const invalidKey = () => new ApiError('ERR_SERVICE_202', 'the API key is not valid; it may have been deleted', {}, CHALLENGE);
export const inactiveBotKey = () => new ApiError('ERR_SERVICE_203', 'the API key belongs to an inactive bot user; activate the bot or use another key', {}, CHALLENGE);

/**
 * Resolves a bearer token to its key and owner, or undefined; through the server's caller
 * cache when it has one, whose hits come back at once rather than as a promise.
 */
export function authenticate(server: ServerContext, token: string): Authenticated | Promise<Authenticated | undefined> {
  return server.callers ? server.callers.resolve(token) : lookUpKey(server.db.hot, digestOf(token));
}

/** The API key holding the token with this digest, and its owner's standing; through the hot reads. */
export async function lookUpKey(rows: TokenRows, digest: string): Promise<Authenticated | undefined> {
  const found = await findTokenHolder(rows, digest, apiKey.kind);
  if (!found?.owner) return undefined;
  const { owner } = found;
  return {
    keyId: found.id,
    ownerId: found.body.owner_id,
    admin: owner.kind === user.kind && (owner.data as { computed: { admin?: boolean } }).computed.admin === true,
    active: ownerActive(owner),
  };
}
