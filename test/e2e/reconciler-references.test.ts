// References across a plan: a replaced resource's referrers move to the new one before the
// old one goes (and are not mistaken for drift), a replacement that forces its referrers'
// replacement replaces them too; taking over an unmanaged resource by its natural key
// needs --adopt. And the option checks that are usage errors exit 2.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { caPem } from '../helpers/edge-fixtures.js';
import { SshTools } from '../helpers/ssh.js';
import { activeChanges, NO_CHANGES, stackRunner, type StackRunner, toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

describe('reconciler: references and replacement', () => {
  let s: TestServer;
  let r: StackRunner;
  let dir: string;
  const userKey = new SshTools().userKey({ type: 'ed25519' });
  const docs = (ca: string, sshType: string): Doc[] => [
    { kind: 'CertificateAuthority', name: 'clients', ca_pem: ca },
    { kind: 'HTTPSEdge', name: 'web', hostports: ['refs.example.com:443'], mutual_tls: { certificate_authority_ids: ['CertificateAuthority/clients'] } },
    { kind: 'TLSEdge', name: 'mqtt', hostports: ['refs.example.com:8883'], mutual_tls: { certificate_authority_ids: ['CertificateAuthority/clients'] } },
    { kind: 'SSHCertificateAuthority', name: 'ssh', private_key_type: sshType },
    { kind: 'SSHUserCertificate', name: 'ann', ssh_certificate_authority_id: 'SSHCertificateAuthority/ssh', public_key: userKey, principals: ['ann'] },
  ];
  const list = async (p: string, key: string) => (await s.get(p)).body[key] as Doc[];

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s);
    dir = manifestDir({ 'stack.yaml': toYaml(docs(caPem('refs CA 1'), 'ed25519')) });
    await r.apply(['-f', dir]);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('replaces a referenced CA: new one first, referrers updated to it, old one deleted last; not drift', async () => {
    const [oldCa] = await list('/certificate_authorities', 'certificate_authorities');
    fs.writeFileSync(path.join(dir, 'stack.yaml'), toYaml(docs(caPem('refs CA 2'), 'ed25519')));
    const plan = await r.run(['plan', '-f', dir]);
    expect(plan.stdout).not.toContain('changed outside edgeform');
    expect(plan.stdout).toContain('~ mutual_tls.certificate_authority_ids[0] = "' + oldCa.id + '" -> (known after apply: CertificateAuthority/clients)');
    const p = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.fromEntries(Object.entries(p).map(([a, c]) => [a, [c.change.actions, !!c.drift]]))).toEqual({
      'CertificateAuthority/clients': [['create', 'delete'], false],
      'HTTPSEdge/web': [['update'], false],
      'TLSEdge/mqtt': [['update'], false],
    });
    // The API refuses to delete a CA an edge still uses: success proves the order.
    const applied = await r.apply(['-f', dir]);
    expect(applied.stdout).toContain('Apply complete! Resources: 1 added, 2 changed, 1 destroyed.');
    const cas = await list('/certificate_authorities', 'certificate_authorities');
    expect(cas).toHaveLength(1);
    expect(cas[0].id).not.toBe(oldCa.id);
    for (const e of [...(await list('/edges/https', 'https_edges')), ...(await list('/edges/tls', 'tls_edges'))]) expect(e.mutual_tls.certificate_authorities.map((c: Doc) => c.id)).toEqual([cas[0].id]);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('replaces an SSH user certificate whose authority is replaced (a reference that cannot change in place)', async () => {
    const [oldCert] = await list('/ssh_user_certificates', 'ssh_user_certificates');
    const ca = (await list('/certificate_authorities', 'certificate_authorities'))[0];
    fs.writeFileSync(path.join(dir, 'stack.yaml'), toYaml(docs(ca.ca_pem, 'ecdsa')));
    const p = activeChanges(await r.planJson(['-f', dir]));
    expect(Object.fromEntries(Object.entries(p).map(([a, c]) => [a, c.change.actions]))).toEqual({
      'SSHCertificateAuthority/ssh': ['create', 'delete'],
      'SSHUserCertificate/ann': ['create', 'delete'],
    });
    await r.apply(['-f', dir]);
    const [authority] = await list('/ssh_certificate_authorities', 'ssh_certificate_authorities');
    expect(authority.key_type).toBe('ecdsa');
    const certs = await list('/ssh_user_certificates', 'ssh_user_certificates');
    expect(certs).toHaveLength(1);
    expect(certs[0].id).not.toBe(oldCert.id);
    expect(certs[0].ssh_certificate_authority_id).toBe(authority.id);
    expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });
});

describe('reconciler: hostports moving between edges', () => {
  it('moves hostports to a new edge and between existing edges in one apply', async () => {
    const s = await startTestServer();
    try {
      const r = stackRunner(s);
      const many = Array.from({ length: 12 }, (_, i) => `h${i}.example.com:443`);
      const dir = manifestDir({ 'edges.yaml': toYaml([{ kind: 'HTTPSEdge', name: 'a', hostports: many }, { kind: 'HTTPSEdge', name: 'c', hostports: ['c.example.com:443'] }]) });
      await r.apply(['-f', dir]);
      // Half of a's hostports go to a new edge b; c's goes to a, and c takes a new one. The
      // taker of each hostport must wait for its holder's update, or the API says 409.
      const moved = [{ kind: 'HTTPSEdge', name: 'a', hostports: [...many.slice(0, 6), 'c.example.com:443'] }, { kind: 'HTTPSEdge', name: 'b', hostports: many.slice(6) }, { kind: 'HTTPSEdge', name: 'c', hostports: ['c2.example.com:443'] }];
      fs.writeFileSync(path.join(dir, 'edges.yaml'), toYaml(moved));
      const applied = await r.run(['apply', '-f', dir, '--auto-approve']);
      expect(applied.code, applied.stdout).toBe(0);
      expect(applied.stdout).toContain('Apply complete! Resources: 1 added, 2 changed, 0 destroyed.');
      const edges = (await s.get('/edges/https')).body.https_edges as Doc[];
      expect(edges.map((e) => e.hostports.sort()).sort()).toEqual(moved.map((d) => d.hostports.sort()).sort());
      expect((await r.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
    } finally {
      await s.close();
    }
  });
});

describe('reconciler: adoption by natural key', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('refuses an edge whose hostport an unmanaged edge holds, until --adopt takes it over', async () => {
    const made = await s.post('/edges/https', { hostports: ['taken.example.com:443'], description: 'made by hand' });
    const r = stackRunner(s);
    const dir = manifestDir({ 'edge.yaml': toYaml([{ kind: 'HTTPSEdge', name: 'taken', hostports: ['Taken.Example.com:443'], description: 'managed now' }]) });
    const refused = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`HTTPSEdge/taken: hostports taken.example.com:443 belongs to ${made.body.id}, which edgeform does not manage; pass --adopt to take it over`);
    const plan = await r.run(['plan', '-f', dir, '--adopt']);
    expect(plan.stdout).toContain('# HTTPSEdge/taken will be updated in-place (adopted into this stack)');
    expect(plan.stdout).toContain('~ description = "made by hand" -> "managed now"');
    await r.apply(['-f', dir, '--adopt']);
    const edges = (await s.get('/edges/https')).body.https_edges;
    expect(edges.map((e: Doc) => [e.id, e.description])).toEqual([[made.body.id, 'managed now']]);
    expect((await r.run(['plan', '-f', dir, '--detailed-exitcode'])).code).toBe(0);
    // Another stack cannot take what this one manages, even with --adopt.
    const other = await stackRunner(s, { EDGEFORM_STACK: 'other' }).run(['plan', '-f', dir, '--adopt']);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain(`belongs to ${made.body.id}, which stack "default" manages (as HTTPSEdge/taken); remove it there first`);
  });

  it.each([
    { args: ['apply', '-f', '{dir}', '--auto-approve', '--parallelism', '0'], reason: 'parallelism below 1' },
    { args: ['apply', '-f', '{dir}', '--auto-approve', '--parallelism', 'many'], reason: 'parallelism not a number' },
    { args: ['apply', '-f', '{dir}', '--auto-approve', '--no-such-option'], reason: 'an unknown option' },
    { args: ['plan'], reason: 'no manifests given' },
    { args: ['plan', '-f', '{dir}', '--stack', 'no spaces'], reason: 'a stack name that cannot be stamped' },
    { args: ['export', '--kind', 'NoSuchKind'], reason: 'an unknown kind to export' },
  ])('exits 2 on a usage error: $reason', async ({ args }) => {
    const dir = manifestDir({});
    const res = await stackRunner(s).run(args.map((a) => (a === '{dir}' ? dir : a)));
    expect(res.code).toBe(2);
    expect(res.stderr).not.toBe('');
  });

  it.each([
    { args: ['plan', '--detailed-exitcode'], reason: 'no manifests given' },
    { args: ['plan', '-f', '{dir}', '--detailed-exitcode', '--no-such-option'], reason: 'an unknown option' },
  ])('exits 1, not 2, on a usage error with --detailed-exitcode, where 2 means changes: $reason', async ({ args }) => {
    const dir = manifestDir({});
    const res = await stackRunner(s).run(args.map((a) => (a === '{dir}' ? dir : a)));
    expect(res.code).toBe(1);
  });
});
