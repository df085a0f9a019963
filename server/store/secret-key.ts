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
import { SEALED_SETTING_PREFIX } from './sealed-settings.js';
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
  const previous = previousKey(s);
  if (box && previous && box.check() === previous.check()) throw unchanged(s);
  return { box, previous };
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
 * Test-only failure injection between the steps of writing a key file (the tests pass it to
 * secretBoxFor directly; the server never sets it): `written` runs once the new key is durable
 * under its temporary name, `committed` once the database is sealed under it, before the file
 * is made final. Throwing from either stands for a full disk, a read-only folder or a kill.
 */
export interface KeyFileSteps {
  written?: () => void;
  committed?: () => void;
}

/** Where the docs say what to keep where, for the messages that send the operator there. */
const KEEP = 'docs/operations.md, "The secret key: what to keep where, and rotation"';

/**
 * The box for this database: checks the configured key against the recorded check value,
 * records it on first use, rotates from the previous key, and generates a key file only
 * for a database that has no key yet.
 *
 * A key this server makes (a new database's, or the one a rotation moves to) is written under
 * a temporary name and synced, with its folder, before anything is sealed with it or its check
 * recorded, and gets its final name only after that commits: a failure at any step (a read-only
 * or full folder, a kill) leaves the database under the key it had. A kill after the commit and
 * before the rename leaves the new key durable under its temporary name, and the next start
 * finishes the rename (finishPendingKey).
 */
export async function secretBoxFor(db: Database, s: SecretKeySettings, log: (msg: string) => void = () => {}, steps: KeyFileSteps = {}): Promise<SecretBox> {
  const recorded = await readCheck(db);
  // A key file is absent but a rotation or first start made one and was stopped before its rename.
  if (!s.secretKey && !fs.existsSync(s.secretKeyFile) && recorded) finishPendingKey(s.secretKeyFile, recorded, log);
  const { box, previous } = configuredKey(s);
  const setting = s.secretKey ? 'EDGEFORM_SECRET_KEY' : `the key file ${s.secretKeyFile} (EDGEFORM_SECRET_KEY_FILE)`;
  const guide = 'instances on one database share one key; to change it, see "The secret key" in docs/api.md';
  const mismatch = () =>
    new SecretKeyMismatch(`${setting} is not the key this database's secrets are sealed with; set EDGEFORM_SECRET_KEY or EDGEFORM_SECRET_KEY_FILE to that key (${guide})`);
  const missing = () =>
    new SecretKeyMismatch(
      `this database's secrets are sealed with a key this server was not given, and they cannot be recovered without that key: restore it to ${s.secretKeyFile} (EDGEFORM_SECRET_KEY_FILE) from where you keep its copy, or set EDGEFORM_SECRET_KEY to it; a new key cannot read them (${KEEP})`,
    );
  const sample = recorded ? undefined : await db.prisma.resource.findFirst({ where: { sealed: { not: null } }, select: { sealed: true } });
  const fits = (b: SecretBox | undefined) => !!b && (recorded ? b.check() === recorded : sample?.sealed ? b.canOpen(sample.sealed) : true);

  if (box && fits(box)) {
    if (!recorded) await recordCheck(db, box, mismatch);
    return box.withPrevious(previous);
  }
  if (previous && (recorded || sample) && fits(previous)) {
    const next = box ?? SecretBox.fromKey(randomBytes(32).toString('hex'));
    // The new key is on disk before the database is sealed under it.
    const pending = box ? undefined : writePendingKey(s.secretKeyFile, next);
    steps.written?.();
    try {
      await rotate(db, previous, next, recorded);
    } catch (e) {
      if (pending) fs.rmSync(pending, { force: true });
      throw e;
    }
    steps.committed?.();
    if (pending) makeFinal(pending, s.secretKeyFile);
    log(`re-sealed every secret under the new key; the previous key is no longer needed once every instance runs with ${s.secretKey ? 'EDGEFORM_SECRET_KEY' : 'EDGEFORM_SECRET_KEY_FILE'}`);
    return next.withPrevious(previous);
  }
  if (box) throw mismatch();
  if (recorded || sample) throw missing();
  // A database with no key yet and no key given: this server makes the key, durable before its
  // check is recorded, final only after. An instance that loses the race to another leaves no file.
  const fresh = SecretBox.fromKey(randomBytes(32).toString('hex'));
  const pending = writePendingKey(s.secretKeyFile, fresh);
  steps.written?.();
  try {
    await recordCheck(db, fresh, () => new SecretKeyMismatch(`another instance started on this database first and made its key; give this one the same key with EDGEFORM_SECRET_KEY or EDGEFORM_SECRET_KEY_FILE (${guide})`));
  } catch (e) {
    fs.rmSync(pending, { force: true });
    throw e;
  }
  steps.committed?.();
  makeFinal(pending, s.secretKeyFile);
  return fresh;
}

/**
 * The previous key is the current key: the old key file was copied (`cp`) instead of moved
 * (`mv`) before a rotation, or both settings name one file or one key. Starting would rotate
 * nothing while the operator believes the key changed, so the start is refused (exit 2).
 */
export class SecretKeyUnchanged extends SecretKeyMismatch {}

function unchanged(s: SecretKeySettings): SecretKeyUnchanged {
  const current = s.secretKey ? 'EDGEFORM_SECRET_KEY' : `the key file ${s.secretKeyFile} (EDGEFORM_SECRET_KEY_FILE)`;
  const previous = s.secretKeyPrevious ? 'EDGEFORM_SECRET_KEY_PREVIOUS' : `EDGEFORM_SECRET_KEY_PREVIOUS_FILE (${s.secretKeyPreviousFile})`;
  return new SecretKeyUnchanged(
    `${previous} holds the same key as ${current}, so nothing would be rotated; to rotate, move the key file away (mv, not cp) so a new one is made, or set EDGEFORM_SECRET_KEY to the new key; to start without rotating, unset ${s.secretKeyPrevious ? 'EDGEFORM_SECRET_KEY_PREVIOUS' : 'EDGEFORM_SECRET_KEY_PREVIOUS_FILE'} (${KEEP})`,
  );
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
    // Server-wide secrets (the SSH host key) are sealed the same way (sealed-settings.ts).
    for (const row of await tx.setting.findMany({ where: { key: { startsWith: SEALED_SETTING_PREFIX } } })) {
      const plain = next.canOpen(row.value) ? next.open(row.value) : previous.open(row.value);
      await tx.setting.update({ where: { key: row.key }, data: { value: next.seal(plain) } });
    }
    await tx.setting.upsert({ where: { key: CHECK_SETTING }, create: { key: CHECK_SETTING, value: next.check() }, update: { value: next.check() } });
  }, { maxWait: 15_000, timeout: 10 * 60_000 });
}

/** Temporary names of a key file being written: `<file>.new-<pid>-<random>`, one per writer. */
const pendingPrefix = (file: string) => `${path.basename(file)}.new-`;

/** Writes the key under a temporary name next to `file` and syncs it and the folder: it survives a crash from here on. */
function writePendingKey(file: string, box: SecretBox): string {
  const dir = path.dirname(file);
  fs.mkdirSync(dir, { recursive: true });
  const pending = path.join(dir, `${pendingPrefix(file)}${process.pid}-${randomBytes(4).toString('hex')}`);
  const fd = fs.openSync(pending, 'wx', 0o600);
  try {
    fs.writeSync(fd, `${box.exportKey()}\n`);
    fs.fsyncSync(fd);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(pending, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  syncDir(dir);
  return pending;
}

/** Gives the pending key its final name, never replacing a file that is there (link fails on one), and syncs the folder. */
function makeFinal(pending: string, file: string) {
  fs.linkSync(pending, file);
  fs.rmSync(pending, { force: true });
  syncDir(path.dirname(file));
}

function syncDir(dir: string) {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The key file is missing but a key written under a temporary name is the one the database is
 * sealed with: the start that wrote it was stopped between the commit and the rename. It is
 * given its final name now. Others (a start stopped before its commit, or one under way
 * beside this one) are left as they are.
 */
function finishPendingKey(file: string, recorded: string, log: (msg: string) => void) {
  const dir = path.dirname(file);
  let names: string[];
  try {
    names = fs.readdirSync(dir).filter((n) => n.startsWith(pendingPrefix(file)));
  } catch {
    return;
  }
  for (const name of names) {
    const pending = path.join(dir, name);
    let box: SecretBox | undefined;
    try {
      box = SecretBox.fromKey(fs.readFileSync(pending, 'utf8'));
    } catch {
      continue;
    }
    if (box.check() !== recorded) continue;
    makeFinal(pending, file);
    log(`finished writing the key file ${file}: the start that made it stopped after sealing the database under it`);
    return;
  }
}
