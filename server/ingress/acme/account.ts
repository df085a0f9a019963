// The ACME account: its key is made once per directory and kept in the database sealed
// under the server's secret key, so every instance (and every restart) uses one account.
import { SEALED_SETTING_PREFIX } from '../../store/sealed-settings.js';
import crypto from 'node:crypto';
import acme from 'acme-client';
import type { ServerContext } from '../../resources/context.js';
import { createSetting } from './settings-rows.js';

const keyOf = (directoryUrl: string) => `${SEALED_SETTING_PREFIX}acme_account:${crypto.createHash('sha256').update(directoryUrl).digest('hex').slice(0, 32)}`;

/** The account key's PEM for this directory, made and stored on first use. */
export async function accountKey(ctx: ServerContext, directoryUrl: string, log: (f: Record<string, unknown>) => void): Promise<string> {
  const key = keyOf(directoryUrl);
  const fresh = (await acme.crypto.createPrivateEcdsaKey('P-256')).toString();
  const stored = await createSetting(ctx, key, ctx.box.seal(fresh));
  try {
    const pem = ctx.box.open(stored);
    // Sealed under the key being rotated away from: sealed again under the current one.
    if (!ctx.box.canOpen(stored)) await ctx.db.prisma.setting.update({ where: { key }, data: { value: ctx.box.seal(pem) } });
    return pem;
  } catch {
    // Sealed under a key this server no longer has: a new account (certificates are kept).
    log({ level: 'warn', msg: 'acme: the stored account key cannot be opened with the secret key; registering a new account' });
    await ctx.db.prisma.setting.update({ where: { key }, data: { value: ctx.box.seal(fresh) } });
    return fresh;
  }
}
