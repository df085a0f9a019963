// Server-wide secrets kept in the Setting table, sealed under the secret key like a resource's
// write-only values: the SSH host key, the local CA, the ACME account key and TLS-ALPN-01
// challenge keys, so that each is the same after a restart and on every instance of one database. Their keys start with `sealed:`, which is how a key rotation
// (secret-key.ts) finds and re-seals them with the resources' sealed values.
import type { Database } from './db.js';
import type { SecretBox } from './secret-box.js';

export const SEALED_SETTING_PREFIX = 'sealed:';

/**
 * The sealed setting `name`, made by `make` on first use. When two instances make it at once,
 * the first write stands and both use it.
 */
export async function sealedSetting(db: Database, box: SecretBox, name: string, make: () => string): Promise<{ value: string; created: boolean }> {
  const key = SEALED_SETTING_PREFIX + name;
  const found = await db.prisma.setting.findUnique({ where: { key } });
  if (found) return { value: box.open(found.value), created: false };
  const value = make();
  try {
    await db.prisma.setting.create({ data: { key, value: box.seal(value) } });
    return { value, created: true };
  } catch (e) {
    if ((e as { code?: string }).code !== 'P2002') throw e;
    const winner = await db.prisma.setting.findUniqueOrThrow({ where: { key } });
    return { value: box.open(winner.value), created: false };
  }
}
