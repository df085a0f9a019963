// The secret key that seals write-only values: the database records which key sealed it,
// a server given another key (or none, where one exists) refuses to start with one line,
// reads, lists and deletes never unseal, and the key can be rotated.
import Database from 'better-sqlite3';
import { createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { CHECK_SETTING } from '../../server/store/secret-key.js';
import { SecretBox } from '../../server/store/secret-box.js';
import { IDP_METADATA, freshHostport } from '../helpers/edge-fixtures.js';
import { receiver } from '../helpers/events.js';
import { eventually } from '../helpers/wait.js';
import { startTestServer, TEST_TOKEN } from '../helpers/server.js';
import { api, killServers, serve, serveToExit } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterEach(killServers);
afterAll(removeTempDirs);

const TOKEN = 'secretkeytest0123456789abcdefghijklmnopqrstuvwxyz';
const WEBHOOK_SECRET = 'whsec_do-not-unseal-me-0123456789';
const DESTINATION_SECRET = 'destination-secret-Zq8Hj2Kp0Lm4Nb6Vc';
const newKey = () => randomBytes(32).toString('hex');

type Post = (p: string, body: unknown) => Promise<{ status: number; body: any }>;

/** Resources that hold sealed values: a route secret, a SAML identity, an SSH CA key, a destination secret. */
async function seed(post: Post, hookUrl: string) {
  const ok = async (p: string, body: unknown) => {
    const r = await post(p, body);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body;
  };
  const edge = await ok('/edges/https', { hostports: [freshHostport()] });
  const route = await ok(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/hooks', webhook_verification: { provider: 'github', secret: WEBHOOK_SECRET } });
  const saml = await ok(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/sso', saml: { idp_metadata: IDP_METADATA } });
  const ca = await ok('/ssh_certificate_authorities', { private_key_type: 'ed25519' });
  const destination = await ok('/event_destinations', { target: { http: { url: hookUrl, secret: DESTINATION_SECRET } } });
  const subscription = await ok('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [destination.id] });
  return { edge, route, saml, ca, destination, subscription };
}

const processPost = (url: string, token: string): Post => async (p, body) => {
  const r = await api(`${url}${p}`, token, 'POST', body);
  return { status: r.status, body: await r.json() };
};

/** Exit 1 with exactly one line on stderr that names the settings, and nothing listening. */
function expectRefused(r: { code: number | null; stdout: string; stderr: string }, names: RegExp) {
  expect(r.code, r.stderr).toBe(1);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^Error: /);
  expect(lines[0]).toMatch(names);
  expect(r.stdout).not.toMatch(/listening/);
}

function withDb<T>(file: string, fn: (db: Database.Database) => T): T {
  const db = new Database(file);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

const sealedOf = (file: string, id: string) => withDb(file, (db) => (db.prepare('SELECT sealed FROM "Resource" WHERE id = ?').get(id) as { sealed: string }).sealed);

describe('the secret key on SQLite', () => {
  it('another key, another key file or no key refuses to start with one line; rotation re-seals every value', async () => {
    const hook = await receiver();
    const dir = tempDir();
    const keyFile = path.join(dir, 'secret.key');
    const dbFile = path.join(dir, 'edgeform.db');
    const first = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
    const made = await seed(processPost(first.url, TOKEN), hook.url);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const originalKey = fs.readFileSync(keyFile, 'utf8').trim();

    expectRefused(await serveToExit(['--data-dir', dir, '--port', '0'], { EDGEFORM_SECRET_KEY: newKey() }), /^Error: EDGEFORM_SECRET_KEY is not the key .*EDGEFORM_SECRET_KEY_FILE/);
    const otherFile = path.join(dir, 'other.key');
    fs.writeFileSync(otherFile, `${newKey()}\n`, { mode: 0o600 });
    expectRefused(await serveToExit(['--data-dir', dir, '--port', '0'], { EDGEFORM_SECRET_KEY_FILE: otherFile }), /other\.key \(EDGEFORM_SECRET_KEY_FILE\) is not the key/);
    // No key at all: a new one would read nothing, so none is made.
    const oldFile = path.join(dir, 'old.key');
    fs.renameSync(keyFile, oldFile);
    expectRefused(await serveToExit(['--data-dir', dir, '--port', '0']), /sealed with a key this server was not given.*EDGEFORM_SECRET_KEY/);
    expect(fs.existsSync(keyFile)).toBe(false);

    // Rotation: the old key as EDGEFORM_SECRET_KEY_PREVIOUS_FILE and no key file: a new key is made and every value re-sealed.
    const rotated = await serve(['--data-dir', dir], { EDGEFORM_SECRET_KEY_PREVIOUS_FILE: oldFile });
    expect(rotated.lines().some((l) => /re-sealed every secret under the new key/.test(l.msg))).toBe(true);
    const newKeyText = fs.readFileSync(keyFile, 'utf8').trim();
    expect(newKeyText).not.toBe(originalKey);
    expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
    const edges = await (await api(`${rotated.url}/edges/https`, TOKEN)).json();
    expect(edges.https_edges.map((e: { id: string }) => e.id)).toEqual([made.edge.id]);
    // The destination's secret survived: deliveries are still signed with it.
    const policy = await (await api(`${rotated.url}/ip_policies`, TOKEN, 'POST', {})).json();
    const got = await eventually(async () => {
      const r = hook.received.find((x) => x.json.object.id === policy.id);
      expect(r).toBeDefined();
      return r!;
    });
    expect(got.headers['service-signature']).toBe(`sha256=${createHmac('sha256', DESTINATION_SECRET).update(got.body).digest('hex')}`);
    // PATCH re-validates the whole route, its unsealed secret included.
    const patched = await api(`${rotated.url}/edges/https/${made.edge.id}/routes/${made.route.id}`, TOKEN, 'PATCH', { description: 'after rotation' });
    expect(patched.status).toBe(200);
    rotated.child.kill('SIGTERM');
    expect(await rotated.exited).toBe(0);
    const newBox = SecretBox.fromKey(newKeyText);
    const oldBox = SecretBox.fromKey(originalKey);
    for (const id of [made.route.id, made.saml.id, made.ca.id, made.destination.id]) {
      expect(newBox.canOpen(sealedOf(dbFile, id)), id).toBe(true);
      expect(oldBox.canOpen(sealedOf(dbFile, id)), id).toBe(false);
    }
    expect(newBox.open(sealedOf(dbFile, made.route.id))).toContain(WEBHOOK_SECRET);

    // After rotation: the old key is refused, the new one alone serves.
    expectRefused(await serveToExit(['--data-dir', dir, '--port', '0'], { EDGEFORM_SECRET_KEY: originalKey }), /EDGEFORM_SECRET_KEY is not the key/);
    const after = await serve(['--data-dir', dir], { EDGEFORM_SECRET_KEY_PREVIOUS_FILE: oldFile });
    expect(after.lines().some((l) => /re-sealed/.test(l.msg))).toBe(false);
    expect((await api(`${after.url}/edges/https`, TOKEN)).status).toBe(200);
    after.child.kill('SIGTERM');
    expect(await after.exited).toBe(0);
    await hook.close();
  }, 300_000);

  it('EDGEFORM_SECRET_KEY_PREVIOUS with EDGEFORM_SECRET_KEY rotates from one given key to another', async () => {
    const [oldKey, nextKey] = [newKey(), newKey()];
    const s = await startTestServer({ secretKey: oldKey });
    const made = await seed((p, b) => s.post(p, b), 'http://127.0.0.1:9/hook');
    await s.server.close();
    const s2 = await startTestServer({ dir: s.dir, secretKey: nextKey, secretKeyPrevious: oldKey });
    expect(SecretBox.fromKey(nextKey).canOpen(sealedOf(path.join(s.dir, 'edgeform.db'), made.ca.id))).toBe(true);
    expect((await s2.patch(`/edges/https/${made.edge.id}/routes/${made.route.id}`, { description: 'x' })).status).toBe(200);
    expect(s2.logs.some((l) => /re-sealed every secret/.test(l))).toBe(true);
    await s2.close();
  });

  it('a database that has sealed values but no check value yet: the key that opens them is recorded, another is refused', async () => {
    const key = newKey();
    const s = await startTestServer({ secretKey: key });
    await seed((p, b) => s.post(p, b), 'http://127.0.0.1:9/hook');
    await s.server.close();
    const dbFile = path.join(s.dir, 'edgeform.db');
    const dropCheck = () => withDb(dbFile, (db) => db.prepare('DELETE FROM "Setting" WHERE key = ?').run(CHECK_SETTING));
    dropCheck();
    await expect(startTestServer({ dir: s.dir, secretKey: newKey() })).rejects.toThrow(/EDGEFORM_SECRET_KEY is not the key/);
    const again = await startTestServer({ dir: s.dir, secretKey: key });
    await again.server.close();
    const recorded = withDb(dbFile, (db) => db.prepare('SELECT value FROM "Setting" WHERE key = ?').get(CHECK_SETTING) as { value: string } | undefined);
    expect(recorded?.value).toBe(SecretBox.fromKey(key).check());
    expect(recorded?.value).not.toContain(key);
    fs.rmSync(s.dir, { recursive: true, force: true });
  });

  it('reads, lists and deletes never unseal: resources whose sealed values are corrupt still list, read and delete', async () => {
    const s = await startTestServer();
    try {
      const made = await seed((p, b) => s.post(p, b), 'http://127.0.0.1:9/hook');
      const before = (await s.get(`/edges/https/${made.edge.id}`)).body;
      withDb(path.join(s.dir, 'edgeform.db'), (db) => db.prepare('UPDATE "Resource" SET sealed = ? WHERE sealed IS NOT NULL').run('v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA==.AAAA'));
      const list = await s.get('/edges/https');
      expect(list.status, list.text).toBe(200);
      expect(list.body.https_edges.find((e: { id: string }) => e.id === made.edge.id)).toEqual(before);
      // The SAML signing certificate is public: it reads back without the sealed value.
      expect(before.routes.find((r: { id: string }) => r.id === made.saml.id).saml.request_signing_certificate_pem).toMatch(/^-----BEGIN CERTIFICATE-----/);
      for (const p of ['/ssh_certificate_authorities', '/event_destinations', `/ssh_certificate_authorities/${made.ca.id}`, `/event_destinations/${made.destination.id}`, `/edges/https/${made.edge.id}/routes/${made.route.id}`]) {
        expect((await s.get(p)).status, p).toBe(200);
      }
      for (const p of [`/edges/https/${made.edge.id}/routes/${made.route.id}`, `/edges/https/${made.edge.id}`, `/ssh_certificate_authorities/${made.ca.id}`, `/event_subscriptions/${made.subscription.id}`, `/event_destinations/${made.destination.id}`]) {
        const r = await s.del(p);
        expect(r.status, `${p}: ${r.text}`).toBe(204);
      }
      expect((await s.get('/edges/https')).body.https_edges).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

const pgAvailable: boolean = postgresAvailable();
if (!pgAvailable) console.warn('\n*** SKIPPING the PostgreSQL secret key tests: initdb is not on the PATH ***\n');

describe.skipIf(!pgAvailable)('the secret key on PostgreSQL', () => {
  it('a second instance with its own generated key refuses to start; with the shared key it serves', async () => {
    const pg = await startPostgres();
    try {
      const url = await pg.createDatabase('edgeform_keys');
      const first = await startTestServer({ databaseUrl: url });
      const made = await seed((p, b) => first.post(p, b), 'http://127.0.0.1:9/hook');
      const secondDir = tempDir();
      expectRefused(await serveToExit(['--data-dir', secondDir, '--port', '0', '--database', url]), /sealed with a key this server was not given.*EDGEFORM_SECRET_KEY_FILE/);
      expect(fs.existsSync(path.join(secondDir, 'secret.key'))).toBe(false);
      expectRefused(await serveToExit(['--data-dir', secondDir, '--port', '0', '--database', url], { EDGEFORM_SECRET_KEY: newKey() }), /EDGEFORM_SECRET_KEY is not the key/);
      const second = await serve(['--data-dir', secondDir, '--database', url], { EDGEFORM_SECRET_KEY_FILE: path.join(first.dir, 'secret.key') });
      const edges = await (await api(`${second.url}/edges/https`, TEST_TOKEN)).json();
      expect(edges.https_edges.map((e: { id: string }) => e.id)).toContain(made.edge.id);
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
      await first.close();

      // Two instances racing on a new database, each about to generate its own key: one starts, the other refuses and leaves no key file.
      const fresh = await pg.createDatabase('edgeform_keys_race');
      const dirs = [tempDir(), tempDir()];
      const raced = await Promise.allSettled(dirs.map((dir) => startTestServer({ databaseUrl: fresh, dir })));
      const started = raced.filter((r) => r.status === 'fulfilled');
      expect(started).toHaveLength(1);
      const refused = raced.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(String(refused.reason.message)).toMatch(/EDGEFORM_SECRET_KEY/);
      expect(dirs.filter((dir) => fs.existsSync(path.join(dir, 'secret.key')))).toHaveLength(1);
      await (started[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof startTestServer>>>).value.server.close();
    } finally {
      pg.stop();
    }
  }, 120_000);
});
