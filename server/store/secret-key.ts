// Which key seals this database's write-only values. The database records a check value
// of the key (an HMAC of a fixed label under it, which says nothing of the key) in the
// Setting table; a server given another key, or none, for a database that already has one
// refuses to start instead of answering 500 on every list that holds a sealed value. The
// key itself never goes in the database. Rotation: start with the new key and the old one
// as EDGEFORM_SECRET_KEY_PREVIOUS(_FILE); every sealed value is re-sealed in one transaction.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Database } from './db.js';
import { SecretBox } from './secret-box.js';

export const CHECK_SETTING = 'secret_key_check';

export interface SecretKeySettings {
  /** EDGEFORM_SECRET_KEY. */
  secretKey?: string;
  /** EDGEFORM_SECRET_KEY_FILE (or its default), used when secretKey is unset. */
  secretKeyFile: string;
  /** EDGEFORM_SECRET_KEY_PREVIOUS / EDGEFORM_SECRET_KEY_PREVIOUS_FILE: the key being rotated away from. */
  secretKeyPrevious?: string;
  secretKeyPreviousFile?: string;
}

/** A start refused because of the key: its message is the one line the operator reads. */
export class SecretKeyMismatch extends Error {}

/** The key named by the settings, read before the database is opened (a malformed key is refused first). */
export function configuredKey(s: SecretKeySettings): { box?: SecretBox; previous?: SecretBox } {
  const box = s.secretKey ? SecretBox.fromKey(s.secretKey) : fs.existsSync(s.secretKeyFile) ? SecretBox.fromKey(fs.readFileSync(s.secretKeyFile, 'utf8')) : undefined;
  return { box, previous: previousKey(s) };
}

/** The key being rotated away from; a problem with it names its own setting. */
function previousKey(s: SecretKeySettings): SecretBox | undefined {
  const setting = s.secretKeyPrevious ? 'EDGEFORM_SECRET_KEY_PREVIOUS' : `EDGEFORM_SECRET_KEY_PREVIOUS_FILE (${s.secretKeyPreviousFile})`;
  let text = s.secretKeyPrevious;
  if (text === undefined && s.secretKeyPreviousFile) {
    try {
      text = fs.readFileSync(s.secretKeyPreviousFile, 'utf8');
    } catch (e) {
      throw new SecretKeyMismatch(`cannot read ${setting}: ${(e as { code?: string }).code ?? (e as Error).message}; name the file that holds the key being replaced`);
    }
  }
  if (text === undefined) return undefined;
  try {
    return SecretBox.fromKey(text);
  } catch {
    throw new SecretKeyMismatch(`${setting} is not a valid key: it must be 32 bytes, written as 64 hex digits or base64`);
  }
}

/**
 * The box for this database: checks the configured key against the recorded check value,
 * records it on first use, rotates from the previous key, and generates a key file only
 * for a database that has no key yet.
 */
export async function secretBoxFor(db: Database, s: SecretKeySettings, log: (msg: string) => void = () => {}): Promise<SecretBox> {
  const { box, previous } = configuredKey(s);
  const setting = s.secretKey ? 'EDGEFORM_SECRET_KEY' : `the key file ${s.secretKeyFile} (EDGEFORM_SECRET_KEY_FILE)`;
  const guide = 'instances on one database share one key; to change it, see "The secret key" in docs/api.md';
  const mismatch = () =>
    new SecretKeyMismatch(`${setting} is not the key this database's secrets are sealed with; set EDGEFORM_SECRET_KEY or EDGEFORM_SECRET_KEY_FILE to that key (${guide})`);
  const missing = () =>
    new SecretKeyMismatch(`this database's secrets are sealed with a key this server was not given, and a new one cannot read them; set EDGEFORM_SECRET_KEY or EDGEFORM_SECRET_KEY_FILE to the key the database was written with (${guide})`);

  const recorded = await readCheck(db);
  const sample = recorded ? undefined : await db.prisma.resource.findFirst({ where: { sealed: { not: null } }, select: { sealed: true } });
  const fits = (b: SecretBox | undefined) => !!b && (recorded ? b.check() === recorded : sample?.sealed ? b.canOpen(sample.sealed) : true);

  if (box && fits(box)) {
    if (!recorded) await recordCheck(db, box, mismatch);
    return box.withPrevious(previous);
  }
  if (previous && (recorded || sample) && fits(previous)) {
    const next = box ?? SecretBox.fromKey(randomBytes(32).toString('hex'));
    await rotate(db, previous, next, recorded);
    if (!box) writeKeyFile(s.secretKeyFile, next);
    log(`re-sealed every secret under the new key; the previous key is no longer needed once every instance runs with ${s.secretKey ? 'EDGEFORM_SECRET_KEY' : 'EDGEFORM_SECRET_KEY_FILE'}`);
    return next.withPrevious(previous);
  }
  if (box) throw mismatch();
  if (recorded || sample) throw missing();
  // A database with no key yet and no key given: this server makes the key. It is written
  // only once it is recorded, so an instance that loses the race to another leaves no file.
  const fresh = SecretBox.fromKey(randomBytes(32).toString('hex'));
  await recordCheck(db, fresh, () => new SecretKeyMismatch(`another instance started on this database first and made its key; give this one the same key with EDGEFORM_SECRET_KEY or EDGEFORM_SECRET_KEY_FILE (${guide})`));
  writeKeyFile(s.secretKeyFile, fresh);
  return fresh;
}

async function readCheck(db: Database): Promise<string | undefined> {
  return (await db.prisma.setting.findUnique({ where: { key: CHECK_SETTING } }))?.value;
}

/** Records the key's check value; when another instance recorded one first, it must be the same. */
async function recordCheck(db: Database, box: SecretBox, mismatch: () => Error) {
  try {
    await db.prisma.setting.create({ data: { key: CHECK_SETTING, value: box.check() } });
  } catch (e) {
    if ((e as { code?: string }).code !== 'P2002') throw e;
    if ((await readCheck(db)) !== box.check()) throw mismatch();
  }
}

/** Re-seals every sealed value under `next` and records its check, in one transaction. */
async function rotate(db: Database, previous: SecretBox, next: SecretBox, recorded: string | undefined) {
  await db.prisma.$transaction(async (tx) => {
    // Another instance rotating at the same time: only the first one's change stands.
    const now = await tx.setting.findUnique({ where: { key: CHECK_SETTING } });
    if ((now?.value ?? undefined) !== recorded) throw new SecretKeyMismatch('the secret key changed while this server was starting (another instance rotated it); start again with the new key');
    const rows = await tx.resource.findMany({ where: { sealed: { not: null } }, select: { id: true, sealed: true } });
    for (const row of rows) {
      // A value some instance still sealed with the new key stays as it is.
      const plain = next.canOpen(row.sealed!) ? next.open(row.sealed!) : previous.open(row.sealed!);
      await tx.resource.update({ where: { id: row.id }, data: { sealed: next.seal(plain) } });
    }
    await tx.setting.upsert({ where: { key: CHECK_SETTING }, create: { key: CHECK_SETTING, value: next.check() }, update: { value: next.check() } });
  }, { maxWait: 15_000, timeout: 10 * 60_000 });
}

function writeKeyFile(file: string, box: SecretBox) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${box.exportKey()}\n`, { mode: 0o600, flag: 'wx' });
}
