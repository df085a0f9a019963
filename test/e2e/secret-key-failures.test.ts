// A key rotation or a new database's first key that fails half-way (a full disk, a folder
// that cannot be written, a kill between two steps) never leaves the database sealed under a
// key that exists nowhere: before the commit the old key keeps working, after it the new key
// is durable under a temporary name and the next start gives it its final name. Also: a copied
// (not moved) old key is refused, and a lost key file says the secrets cannot be recovered.
// Over a real SQLite file and a real PostgreSQL database, with the failures injected between
// the steps of secretBoxFor (the tests run as root, so a chmod would not stop a write).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { startPostgres } from '../../scripts/pg-cluster.mjs';
import { openDatabase, type Database } from '../../server/store/db.js';
import { CHECK_SETTING, configuredKey, secretBoxFor, SecretKeyMismatch, SecretKeyUnchanged, type KeyFileSteps, type SecretKeySettings } from '../../server/store/secret-key.js';
import { SecretBox } from '../../server/store/secret-box.js';
import { DATABASES } from '../helpers/databases.js';
import { killServers, serve, serveToExit, api } from '../helpers/serve.js';
import { startTestServer, TEST_TOKEN } from '../helpers/server.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterEach(killServers);
afterAll(removeTempDirs);

const pgs: { stop(): void }[] = [];
afterAll(() => { for (const pg of pgs) pg.stop(); });

/** A database URL of `db`: a SQLite file in `dir`, or a new database in a throwaway cluster. */
async function databaseUrl(db: 'SQLite' | 'PostgreSQL', dir: string, name: string): Promise<string> {
  if (db === 'SQLite') return `file:${path.join(dir, 'edgeform.db')}`;
  const pg = await startPostgres();
  pgs.push(pg);
  return pg.createDatabase(name);
}

/** A database with sealed values (an SSH CA's key) under the key the server generated in `dir`/secret.key. */
async function sealedDatabase(url: string, dir: string) {
  const s = await startTestServer({ dir, databaseUrl: url });
  const ca = await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' });
  expect(ca.status, ca.text).toBe(201);
  await s.server.close();
  return { caId: ca.body.id as string, key: fs.readFileSync(path.join(dir, 'secret.key'), 'utf8').trim() };
}

const settings = (dir: string, more: Partial<SecretKeySettings> = {}): SecretKeySettings => ({ secretKeyFile: path.join(dir, 'secret.key'), ...more });

async function withDb<T>(url: string, fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabase(url);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

const sealedOf = (db: Database, id: string) => db.prisma.resource.findUniqueOrThrow({ where: { id }, select: { sealed: true } }).then((r) => r.sealed!);
const checkOf = async (db: Database) => (await db.prisma.setting.findUnique({ where: { key: CHECK_SETTING } }))?.value;
const pendingIn = (dir: string) => fs.readdirSync(dir).filter((n) => n.startsWith('secret.key.new-'));

/** The failure an injected step throws: what a full disk or a kill looks like to the caller. */
const fail = (what: string) => () => {
  throw Object.assign(new Error(`injected: ${what}`), { code: 'ENOSPC' });
};

describe.each(DATABASES)('key files written half-way on $db', ({ db: kind, skip }) => {
  it.skipIf(skip)('a rotation that fails before its commit (disk full, key folder unwritable) leaves the old key working; one killed after it is finished at the next start', async () => {
    const dir = tempDir();
    const url = await databaseUrl(kind, dir, 'rotation');
    const { caId, key: oldKey } = await sealedDatabase(url, dir);
    const oldFile = path.join(dir, 'secret.key.old');
    fs.renameSync(path.join(dir, 'secret.key'), oldFile);
    const rotating = settings(dir, { secretKeyPreviousFile: oldFile });
    const oldBox = SecretBox.fromKey(oldKey);

    await withDb(url, async (db) => {
      const before = await checkOf(db);
      expect(before).toBe(oldBox.check());
      // 1. The disk fills once the new key is written: nothing is sealed with it, the old key is still the database's.
      await expect(secretBoxFor(db, rotating, () => {}, { written: fail('disk full after the key was written') })).rejects.toThrow(/injected/);
      expect(await checkOf(db)).toBe(before);
      expect(oldBox.canOpen(await sealedOf(db, caId))).toBe(true);
      expect(fs.existsSync(path.join(dir, 'secret.key'))).toBe(false);

      // 2. The key folder cannot be written (a file where the folder should be: root ignores chmod): refused before any change.
      const blocker = path.join(dir, 'blocker');
      fs.writeFileSync(blocker, '');
      await expect(secretBoxFor(db, settings(blocker, { secretKeyPreviousFile: oldFile }))).rejects.toMatchObject({ code: expect.stringMatching(/^(ENOTDIR|EEXIST)$/) });
      expect(await checkOf(db)).toBe(before);
      expect(oldBox.canOpen(await sealedOf(db, caId))).toBe(true);

      // The old key still serves on its own, as it did before the attempts.
      const asBefore = await secretBoxFor(db, settings(dir, { secretKeyFile: oldFile }));
      expect(asBefore.open(await sealedOf(db, caId))).toMatch(/PRIVATE KEY/);

      // 3. Killed between the commit and the rename: the database is under the new key, which is on disk under its temporary name.
      const steps: KeyFileSteps = { committed: fail('killed after the commit') };
      await expect(secretBoxFor(db, rotating, () => {}, steps)).rejects.toThrow(/injected/);
      const after = await checkOf(db);
      expect(after).not.toBe(before);
      expect(fs.existsSync(path.join(dir, 'secret.key'))).toBe(false);
      const pending = pendingIn(dir).map((n) => SecretBox.fromKey(fs.readFileSync(path.join(dir, n), 'utf8')));
      expect(pending.filter((b) => b.check() === after)).toHaveLength(1);
    });

    // The next start (a fresh process would do the same) gives that key its final name and serves with it.
    const lines: string[] = [];
    await withDb(url, async (db) => {
      const box = await secretBoxFor(db, settings(dir), (m) => lines.push(m));
      expect(box.check()).toBe(await checkOf(db));
      expect(box.open(await sealedOf(db, caId))).toMatch(/PRIVATE KEY/);
    });
    expect(lines.join('\n')).toMatch(/finished writing the key file/);
    expect(SecretBox.fromKey(fs.readFileSync(path.join(dir, 'secret.key'), 'utf8')).check()).not.toBe(oldBox.check());
    expect(fs.statSync(path.join(dir, 'secret.key')).mode & 0o777).toBe(0o600);
  }, 120_000);

  it.skipIf(skip)('a new database whose key cannot be made final is started again with that key; one that fails before its check is recorded starts afresh', async () => {
    const dir = tempDir();
    const url = await databaseUrl(kind, dir, 'fresh');
    await withDb(url, async (db) => {
      await expect(secretBoxFor(db, settings(dir), () => {}, { written: fail('disk full') })).rejects.toThrow(/injected/);
      // Nothing recorded: the database has no key yet, so the next start may make one.
      expect(await checkOf(db)).toBeUndefined();
      await expect(secretBoxFor(db, settings(dir), () => {}, { committed: fail('killed before the rename') })).rejects.toThrow(/injected/);
      const recorded = await checkOf(db);
      expect(recorded).toBeDefined();
      expect(fs.existsSync(path.join(dir, 'secret.key'))).toBe(false);
      // Before this change, the check was recorded for a key written nowhere: every later start was refused.
      const box = await secretBoxFor(db, settings(dir));
      expect(box.check()).toBe(recorded);
      expect(SecretBox.fromKey(fs.readFileSync(path.join(dir, 'secret.key'), 'utf8')).check()).toBe(recorded);
    });
  }, 120_000);

  it.skipIf(skip)('a copied (not moved) old key is refused as a rotation that rotates nothing; a lost key file says the secrets cannot be recovered and where the key belongs', async () => {
    const dir = tempDir();
    const url = await databaseUrl(kind, dir, 'copied');
    await sealedDatabase(url, dir);
    const keyFile = path.join(dir, 'secret.key');
    const copy = path.join(dir, 'secret.key.old');
    fs.copyFileSync(keyFile, copy);
    expect(() => configuredKey(settings(dir, { secretKeyPreviousFile: copy }))).toThrow(SecretKeyUnchanged);
    expect(() => configuredKey(settings(dir, { secretKeyPreviousFile: keyFile }))).toThrow(/EDGEFORM_SECRET_KEY_PREVIOUS_FILE .* holds the same key as the key file .*nothing would be rotated.*mv, not cp/);
    const key = fs.readFileSync(keyFile, 'utf8').trim();
    expect(() => configuredKey({ secretKeyFile: keyFile, secretKey: key, secretKeyPrevious: key })).toThrow(/EDGEFORM_SECRET_KEY_PREVIOUS holds the same key as EDGEFORM_SECRET_KEY/);

    fs.rmSync(keyFile);
    fs.rmSync(copy);
    await withDb(url, async (db) => {
      const refused = await secretBoxFor(db, settings(dir)).catch((e) => e);
      expect(refused).toBeInstanceOf(SecretKeyMismatch);
      expect(refused.message).toMatch(/cannot be recovered without that key/);
      expect(refused.message).toContain(keyFile);
      expect(refused.message).toMatch(/docs\/operations\.md/);
    });
    expect(fs.existsSync(keyFile)).toBe(false);
  }, 120_000);
});

describe('edgeform serve on a key rotation that cannot finish', () => {
  it('an unwritable key file folder refuses the rotation with one line and the old key still serves; a copied key is refused with exit 2', async () => {
    const dir = tempDir();
    const first = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: TEST_TOKEN });
    const ca = await (await api(`${first.url}/ssh_certificate_authorities`, TEST_TOKEN, 'POST', { private_key_type: 'ed25519' })).json();
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const keyFile = path.join(dir, 'secret.key');
    const oldFile = path.join(dir, 'secret.key.old');

    // cp instead of mv: nothing would rotate; exit 2 naming both settings.
    fs.copyFileSync(keyFile, oldFile);
    const copied = await serveToExit(['--data-dir', dir, '--port', '0'], { EDGEFORM_SECRET_KEY_PREVIOUS_FILE: oldFile });
    expect(copied.code, copied.stderr).toBe(2);
    expect(copied.stderr.trim().split('\n')).toHaveLength(1);
    expect(copied.stderr).toMatch(/^Error: EDGEFORM_SECRET_KEY_PREVIOUS_FILE .*same key as the key file .*EDGEFORM_SECRET_KEY_FILE.*nothing would be rotated/);

    // mv, but the new key file's folder cannot be written: refused before anything is re-sealed.
    fs.renameSync(keyFile, oldFile);
    const blocker = path.join(dir, 'not-a-folder');
    fs.writeFileSync(blocker, '');
    const refused = await serveToExit(['--data-dir', dir, '--port', '0'], { EDGEFORM_SECRET_KEY_PREVIOUS_FILE: oldFile, EDGEFORM_SECRET_KEY_FILE: path.join(blocker, 'secret.key') });
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/cannot write .*not-a-folder.*EDGEFORM_SECRET_KEY_FILE/);
    const again = await serve(['--data-dir', dir], { EDGEFORM_SECRET_KEY_FILE: oldFile });
    const read = await api(`${again.url}/ssh_certificate_authorities/${ca.id}`, TEST_TOKEN);
    expect(read.status).toBe(200);
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
    await withDb(`file:${path.join(dir, 'edgeform.db')}`, async (db) => {
      expect(SecretBox.fromKey(fs.readFileSync(oldFile, 'utf8')).open(await sealedOf(db, ca.id))).toMatch(/PRIVATE KEY/);
    });
  }, 120_000);
});
