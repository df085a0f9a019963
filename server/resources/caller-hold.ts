// A write commits only if its caller may still write when it commits. The request was
// authenticated before the write transaction opened; a DELETE of the caller's key or a
// PATCH deactivating its bot could commit in between, and the write would then land after
// the answer that said the key was gone. Inside the transaction the key is checked again
// and held (a key's delete and a bot's deactivation wait for the writes already holding
// them; later writes see the change and are refused like the request would have been).
import { botUser } from '../../provider/catalog/accounts.js';
import { kindOfId } from '../../provider/catalog/index.js';
import { inactiveBotKey, invalidKey, ownerActive } from './accounts.js';
import type { Writes } from '../store/hot-writes.js';
import type { Ctx } from './context.js';

export async function holdCaller(ctx: Ctx, w: Writes): Promise<void> {
  const caller = ctx.caller;
  // No key: an operator command run with shell access (edgeform admin create-key).
  if (!caller?.keyId) return;
  const bot = kindOfId(caller.ownerId)?.kind === botUser.kind;
  // Only a bot's row says whether its keys work; a user's may change while its keys write.
  if (!bot) {
    // A user's keys work while the key and the user exist: nothing of either row is read.
    if ((await w.hold([caller.keyId, caller.ownerId], 'KEY SHARE')).length < 2) throw invalidKey();
    return;
  }
  // Both locks are sent at once (one round trip on PostgreSQL) and taken in this order.
  const [key, [owner]] = await Promise.all([w.hold([caller.keyId], 'KEY SHARE'), w.lock([caller.ownerId], 'SHARE')]);
  if (!key.length || !owner) throw invalidKey();
  if (!ownerActive(owner)) throw inactiveBotKey();
}
