// SSH credentials (SPEC's "SSH credential used to start the session"): the public key is
// checked on create and is one credential at a time, whatever its comment; the acl, owner
// and metadata follow the tunnel credential's rules; there is no token.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, ID } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SshTools } from '../helpers/ssh.js';

let s: TestServer;
let ssh: SshTools;
beforeAll(async () => {
  s = await startTestServer();
  ssh = new SshTools();
});
afterAll(async () => {
  await s.close();
  ssh.close();
});

describe('SSH credentials', () => {
  it('are created from an authorized-keys line, read back as given, with no token and owned by the caller', async () => {
    const key = ssh.userKey({ type: 'ed25519' });
    const r = await s.post('/ssh_credentials', { public_key: `${key}\n`, acl: ['bind:app.example.com'], description: 'laptop', metadata: '{"team":"edge"}' });
    expect(r.status, r.text).toBe(201);
    expect(r.body.id).toMatch(ID);
    expect(r.body.id.startsWith('sshcr_')).toBe(true);
    expect(r.body).toMatchObject({ public_key: key, acl: ['bind:app.example.com'], description: 'laptop', metadata: '{"team":"edge"}' });
    expect(r.body.owner_id).toMatch(/^usr_/);
    expect(r.body).not.toHaveProperty('token');
    const got = await s.get(`/ssh_credentials/${r.body.id}`);
    expect(got.body).toEqual(r.body);
    const list = await s.get('/ssh_credentials');
    expect(list.body.ssh_credentials.map((c: { id: string }) => c.id)).toContain(r.body.id);
  });

  it.each([
    { reason: 'RSA 3072', spec: { type: 'rsa', bits: 3072 } as const },
    { reason: 'ECDSA P-384', spec: { type: 'ecdsa', bits: 384 } as const },
  ])('accept a $reason key', async ({ spec }) => {
    const r = await s.post('/ssh_credentials', { public_key: ssh.userKey(spec) });
    expect(r.status, r.text).toBe(201);
    expect(r.body.acl).toEqual([]);
  });

  it('hold a key once: the same key with another comment is 409 naming the holder', async () => {
    const key = ssh.userKey({ type: 'ed25519' });
    const first = await s.post('/ssh_credentials', { public_key: key });
    expect(first.status, first.text).toBe(201);
    const again = await s.post('/ssh_credentials', { public_key: `${key.split(' ').slice(0, 2).join(' ')}  someone@else` });
    const body = expectError(again, 409, 'ERR_SERVICE_320');
    expect(body.details).toMatchObject({ field: 'public_key', conflicting_id: first.body.id });
    // Deleting the holder frees the key.
    expect((await s.del(`/ssh_credentials/${first.body.id}`)).status).toBe(204);
    expect((await s.post('/ssh_credentials', { public_key: key })).status).toBe(201);
  });

  it.each([
    { reason: 'not a key', key: 'hello', msg: /algorithm/ },
    { reason: 'a certificate', key: 'ssh-ed25519-cert-v01@openssh.com AAAA', msg: /certificate/ },
    { reason: 'a blob that names another algorithm', key: () => `ssh-rsa ${ssh.userKey({ type: 'ed25519' }).split(' ')[1]}`, msg: /holds a ssh-ed25519 key/ },
    { reason: 'a short RSA key', key: () => ssh.userKey({ type: 'rsa', bits: 1024 }), msg: /at least 2048/ },
    { reason: 'two keys', key: () => `${ssh.userKey({ type: 'ed25519' })}\n${ssh.userKey({ type: 'ed25519' })}`, msg: /exactly one public key/ },
  ])('refuse $reason with 400 naming public_key', async ({ key, msg }) => {
    const r = await s.post('/ssh_credentials', { public_key: typeof key === 'function' ? key() : key });
    expect(expectInvalid(r, 'public_key').msg).toMatch(msg);
  });

  it('change acl, description and metadata in place; the key only by replacement', async () => {
    const created = await s.post('/ssh_credentials', { public_key: ssh.userKey({ type: 'ed25519' }) });
    const patched = await s.patch(`/ssh_credentials/${created.body.id}`, { acl: ['bind:env=dev'], description: 'ci' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ acl: ['bind:env=dev'], description: 'ci', public_key: created.body.public_key });
    const rekey = await s.patch(`/ssh_credentials/${created.body.id}`, { public_key: ssh.userKey({ type: 'ed25519' }) });
    expect(rekey.status).toBe(400);
  });
});
