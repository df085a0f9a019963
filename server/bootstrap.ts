// First start of an empty database: the account's admin user and its first API key.
import fs from 'node:fs';
import path from 'node:path';
import { apiKey, user } from '../provider/catalog/accounts.js';
import { digestOf, newToken } from './http/tokens.js';
import type { Database } from './store/db.js';
import { newId } from './store/ids.js';

export interface Bootstrap {
  /** True when this start created the admin and its key. */
  created: boolean;
  /** Where the generated token was written (absent when EDGEFORM_BOOTSTRAP_TOKEN supplied it). */
  tokenFile?: string;
  /**
   * The generated token when its file already existed: that file is another database's first
   * token (a second server from the same data folder, or a database since removed) and is never
   * overwritten, so this token is shown once on stderr only. `tokenFileKept` names that file.
   */
  token?: string;
  tokenFileKept?: string;
  userId?: string;
  keyId?: string;
}

export async function bootstrap(db: Database, opts: { token?: string; tokenFile: string }): Promise<Bootstrap> {
  try {
    return await createAccount(db, opts);
  } catch (e) {
    // Another instance starting on the same (PostgreSQL) database created the account first.
    if ((e as { code?: string }).code === 'P2002') return { created: false };
    throw e;
  }
}

async function createAccount(db: Database, opts: { token?: string; tokenFile: string }): Promise<Bootstrap> {
  return db.prisma.$transaction(async (tx) => {
    if (await tx.resource.findFirst({ where: { kind: user.kind }, select: { id: true } })) return { created: false };
    const now = new Date();
    const userId = newId(user.prefix);
    const keyId = newId(apiKey.prefix);
    const token = opts.token ?? newToken();
    // The account row is the lock: a concurrent bootstrap waits on this insert, then fails with P2002.
    await tx.setting.create({ data: { key: 'account_id', value: newId('acct') } });
    await tx.resource.create({ data: { id: userId, kind: user.kind, createdAt: now, updatedAt: now, data: { body: {}, computed: { name: 'admin', admin: true } } } });
    await tx.resource.create({
      data: { id: keyId, kind: apiKey.kind, createdAt: now, updatedAt: now, data: { body: { description: 'bootstrap key of the admin user', metadata: '', owner_id: userId }, computed: {} } },
    });
    await tx.reference.create({ data: { fromId: keyId, path: 'owner_id', toId: userId, onDelete: 'cascade', heldId: userId } });
    await tx.token.create({ data: { digest: digestOf(token), resourceId: keyId } });
    if (opts.token) return { created: true, userId, keyId };
    fs.mkdirSync(path.dirname(opts.tokenFile), { recursive: true });
    try {
      // wx: a token file that exists belongs to another database; overwriting it would lock its users out of their only token.
      fs.writeFileSync(opts.tokenFile, `${token}\n`, { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as { code?: string }).code !== 'EEXIST') throw e;
      return { created: true, token, tokenFileKept: opts.tokenFile, userId, keyId };
    }
    fs.chmodSync(opts.tokenFile, 0o600);
    return { created: true, tokenFile: opts.tokenFile, userId, keyId };
  });
}
