// Private keys and secrets are encrypted at rest: the database files (SQLite and its WAL)
// hold no TLS private key, no SSH CA private key and no module or destination secret in
// clear text, while the sealed column, opened with the server key, does hold each of them.
import Database from 'better-sqlite3';
import { createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicKeyOf } from '../../server/crypto/ssh-keys.js';
import { SecretBox } from '../../server/store/secret-box.js';
import { Pki } from '../helpers/pki.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let pki: Pki;
beforeAll(async () => {
  s = await startTestServer();
  pki = new Pki();
});
afterAll(async () => {
  await s.close();
  pki.close();
});

/** Every byte the database keeps on disk: the SQLite file and its journal files. */
function databaseBytes(): Buffer {
  const files = fs.readdirSync(s.dir).filter((f) => /\.db(-wal|-shm|-journal)?$/.test(f));
  expect(files.length).toBeGreaterThan(0);
  return Buffer.concat(files.map((f) => fs.readFileSync(path.join(s.dir, f))));
}

/**
 * Ways a secret could sit in the file in clear. A key's PEM text is caught by its armour
 * (checked separately); its private components (JWK d, p, q, ...) are caught raw, base64
 * and base64url. Whole PEM lines are not searched: they also cover public parts (an RSA
 * modulus), which the database may hold in other encodings by coincidence of alignment.
 */
function clearForms(secret: string): Buffer[] {
  if (!secret.includes('-----BEGIN')) return [Buffer.from(secret)];
  const jwk = createPrivateKey(secret).export({ format: 'jwk' }) as Record<string, string | undefined>;
  return ['d', 'p', 'q', 'dp', 'dq', 'qi'].flatMap((k) => {
    const raw = jwk[k] ? Buffer.from(jwk[k]!, 'base64url') : undefined;
    return raw ? [raw, Buffer.from(raw.toString('base64url')), Buffer.from(raw.toString('base64'))] : [];
  });
}

function sealedOf(id: string): { fields: Record<string, unknown>; internal: Record<string, any> } {
  const db = new Database(fs.readdirSync(s.dir).map((f) => path.join(s.dir, f)).find((f) => f.endsWith('.db'))!, { readonly: true });
  try {
    const row = db.prepare('SELECT sealed FROM "Resource" WHERE id = ?').get(id) as { sealed: string };
    return JSON.parse(SecretBox.fromKey(fs.readFileSync(path.join(s.dir, 'secret.key'), 'utf8')).open(row.sealed));
  } finally {
    db.close();
  }
}

describe('secrets at rest', () => {
  const secrets: { what: string; value: string }[] = [];

  beforeAll(async () => {
    for (const key of ['rsa2048', 'p384', 'ed25519'] as const) {
      const made = pki.issue(key, { subject: [['CN', `${key}.example`]] });
      const r = await s.post('/tls_certificates', { certificate_pem: made.cert, private_key_pem: made.key });
      expect(r.status, r.text).toBe(201);
      expect(sealedOf(r.body.id).fields.private_key_pem).toBe(made.key);
      secrets.push({ what: `TLS ${key} private key`, value: made.key });
    }
    for (const body of [{ private_key_type: 'rsa', key_size: 2048 }, { private_key_type: 'ecdsa', elliptic_curve: 'p521' }, { private_key_type: 'ed25519' }]) {
      const r = await s.post('/ssh_certificate_authorities', body);
      expect(r.status, r.text).toBe(201);
      const pem = sealedOf(r.body.id).internal.private_key_pem as string;
      // The sealed key is the CA's real key: its public half is the public_key shown.
      const pub = publicKeyOf(createPrivateKey(pem));
      expect(`${pub.algorithm} ${pub.blob.toString('base64')}`).toBe(r.body.public_key);
      secrets.push({ what: `SSH CA ${body.private_key_type} private key`, value: pem });
    }
    const destinationSecret = 'destination-secret-Zq8Hj2Kp0Lm4Nb6Vc';
    const dest = await s.post('/event_destinations', { target: { http: { url: 'http://127.0.0.1:9/hook', secret: destinationSecret } } });
    expect(dest.status, dest.text).toBe(201);
    secrets.push({ what: 'event destination secret', value: destinationSecret });
    const webhookSecret = 'webhook-secret-Rt5Yu7Io9Pa1Sd3Fg';
    const edge = await s.post('/edges/https', { hostports: ['secrets.example:443'] });
    expect(edge.status, edge.text).toBe(201);
    const route = await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/', webhook_verification: { provider: 'github', secret: webhookSecret } });
    expect(route.status, route.text).toBe(201);
    expect(route.body.webhook_verification.secret).toBeNull();
    secrets.push({ what: 'route module webhook secret', value: webhookSecret });
  });

  it('the database files hold none of them in clear text', () => {
    const bytes = databaseBytes();
    expect(bytes.includes('PRIVATE KEY')).toBe(false);
    for (const { what, value } of secrets) {
      for (const form of clearForms(value)) expect(bytes.includes(form), `${what} is in the database in clear`).toBe(false);
    }
  });

  it('nor do the request logs', () => {
    const logs = s.logs.join('\n');
    for (const { what, value } of secrets) {
      for (const form of clearForms(value)) expect(logs.includes(form.toString('latin1')), `${what} is in the logs`).toBe(false);
    }
  });

  it('after a restart the keys still open and still sign', async () => {
    await s.restart();
    const ca = (await s.get('/ssh_certificate_authorities?limit=1')).body.ssh_certificate_authorities[0];
    const r = await s.post('/ssh_user_certificates', { ssh_certificate_authority_id: ca.id, public_key: publicKeyLine() });
    expect(r.status, r.text).toBe(201);
    expect(databaseBytes().includes('PRIVATE KEY')).toBe(false);
  });
});

/** An Ed25519 public key in authorized-keys form (any valid key will do). */
function publicKeyLine(): string {
  const key = createPrivateKey(pki.key('ed25519').pem);
  const pub = publicKeyOf(key);
  return `${pub.algorithm} ${pub.blob.toString('base64')}`;
}
