// The ACME state every instance on one database shares, kept in the Setting table (a key
// and a text value; the account key is a sealed setting, account.ts): the challenges being
// answered (whichever instance the directory reaches answers them) and one lease per name
// (one order per name at a time across instances). No schema of its own: a row per thing.
import type { ServerContext } from '../../resources/context.js';

/** A unique-key refusal (Prisma P2002): another instance wrote the row first. */
const taken = (e: unknown) => (e as { code?: string })?.code === 'P2002';

export async function readSetting(ctx: ServerContext, key: string): Promise<string | undefined> {
  return (await ctx.db.prisma.setting.findUnique({ where: { key } }))?.value;
}

export async function putSetting(ctx: ServerContext, key: string, value: string): Promise<void> {
  await ctx.db.prisma.setting.upsert({ where: { key }, create: { key, value }, update: { value } });
}

export async function deleteSetting(ctx: ServerContext, key: string, value?: string): Promise<void> {
  await ctx.db.prisma.setting.deleteMany({ where: { key, ...(value === undefined ? {} : { value }) } });
}

/**
 * Takes the row `key` for `holder` until `untilMs` when it is free or its holder's time has
 * passed; false when another holder has it. Compare-and-set on the stored value, so of two
 * instances taking an expired lease at once one wins.
 */
export async function takeLease(ctx: ServerContext, key: string, holder: string, untilMs: number, nowMs = Date.now()): Promise<boolean> {
  const value = `${holder} ${untilMs}`;
  try {
    await ctx.db.prisma.setting.create({ data: { key, value } });
    return true;
  } catch (e) {
    if (!taken(e)) throw e;
  }
  const old = await readSetting(ctx, key);
  if (old === undefined) return takeLease(ctx, key, holder, untilMs, nowMs);
  const [who, until] = old.split(' ');
  if (who !== holder && Number(until) > nowMs) return false;
  const { count } = await ctx.db.prisma.setting.updateMany({ where: { key, value: old }, data: { value } });
  return count === 1;
}
