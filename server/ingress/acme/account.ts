// The ACME account: its key is made once per directory and kept in the database as a sealed
// setting (store/sealed-settings.ts), so every instance (and every restart) uses one account
// and a key rotation re-seals it with the other server secrets.
import crypto from 'node:crypto';
import acme from 'acme-client';
import type { ServerContext } from '../../resources/context.js';
import { SEALED_SETTING_PREFIX, sealedSetting } from '../../store/sealed-settings.js';

const nameOf = (directoryUrl: string) => `acme_account:${crypto.createHash('sha256').update(directoryUrl).digest('hex').slice(0, 32)}`;

/** The account key's PEM for this directory, made and stored on first use. */
export async function accountKey(ctx: ServerContext, directoryUrl: string, log: (f: Record<string, unknown>) => void): Promise<string> {
  const name = nameOf(directoryUrl);
  const fresh = (await acme.crypto.createPrivateEcdsaKey('P-256')).toString();
  try {
    return (await sealedSetting(ctx.db, ctx.box, name, () => fresh)).value;
  } catch (e) {
    if (!(await ctx.db.prisma.setting.findUnique({ where: { key: SEALED_SETTING_PREFIX + name } }))) throw e;
    // Stored, but sealed under a key this server no longer has: a new account (certificates are kept).
    log({ level: 'warn', msg: 'acme: the stored account key cannot be opened with the secret key; registering a new account' });
    await ctx.db.prisma.setting.update({ where: { key: SEALED_SETTING_PREFIX + name }, data: { value: ctx.box.seal(fresh) } });
    return fresh;
  }
}
