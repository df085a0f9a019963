// The same value written another way is no change: a PEM or an SSH key read from a file
// (final newline) against the same text written inline in YAML (`|-`, no final newline),
// or with CRLF line ends. Before, each of these replaced the certificate.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import { caPem } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SshTools } from '../helpers/ssh.js';
import { manifestDir } from '../helpers/cli.js';
import { NO_CHANGES, stackRunner, type StackRunner } from '../helpers/reconciler.js';

const block = (text: string) => `|-\n${text.trimEnd().split('\n').map((l) => `  ${l}`).join('\n')}`;

describe('reconciler: equivalent forms of a value plan no changes', () => {
  let s: TestServer;
  let r: StackRunner;
  let leaf: { certificatePem: string; privateKeyPem: string };
  let ca: string;
  let userKey: string;

  beforeAll(async () => {
    s = await startTestServer();
    leaf = issueCertificate({ subject: { commonName: 'forms.example.com' }, key: 'p256' } as never);
    ca = caPem('Forms CA');
    userKey = new SshTools().userKey({ type: 'ed25519' });
    // The private key from the environment without its final newline, as $(cat key.pem) gives it.
    r = stackRunner(s, { FORMS_KEY: leaf.privateKeyPem.trimEnd() });
  });
  afterAll(async () => {
    await s?.close();
  });

  const inline = () =>
    manifestDir({
      'stack.yaml': [
        `kind: TLSCertificate\nname: web\ncertificate_pem: ${block(leaf.certificatePem)}\nprivate_key_pem: \${env:FORMS_KEY}\n`,
        `kind: CertificateAuthority\nname: clients\nca_pem: ${block(ca)}\n`,
        'kind: SSHCertificateAuthority\nname: ssh\nprivate_key_type: ed25519\n',
        `kind: SSHUserCertificate\nname: ann\nssh_certificate_authority_id: SSHCertificateAuthority/ssh\npublic_key: "${userKey.trim()}"\nvalid_until: "2030-01-01T00:00:00Z"\n`,
      ].join('---\n'),
    });

  const fromFiles = () => {
    const dir = manifestDir({
      'stack.yaml': [
        'kind: TLSCertificate\nname: web\ncertificate_pem: ${file:web.pem}\nprivate_key_pem: ${file:web.key}\n',
        'kind: CertificateAuthority\nname: clients\nca_pem: ${file:ca.pem}\n',
        'kind: SSHCertificateAuthority\nname: ssh\nprivate_key_type: ed25519\n',
        'kind: SSHUserCertificate\nname: ann\nssh_certificate_authority_id: SSHCertificateAuthority/ssh\npublic_key: ${file:id.pub}\nvalid_until: "2030-01-01T00:00:00Z"\n',
      ].join('---\n'),
    });
    const withNewline = (t: string) => `${t.trimEnd()}\n`;
    fs.writeFileSync(path.join(dir, 'web.pem'), withNewline(leaf.certificatePem));
    fs.writeFileSync(path.join(dir, 'web.key'), withNewline(leaf.privateKeyPem));
    fs.writeFileSync(path.join(dir, 'ca.pem'), withNewline(ca).replace(/\n/g, '\r\n'));
    fs.writeFileSync(path.join(dir, 'id.pub'), `${userKey.trim()}\n`);
    return dir;
  };

  it('PEMs and an SSH key written inline, then read from files with final newlines and CRLF', async () => {
    await r.apply(['-f', inline()]);
    const plan = await r.run(['plan', '-f', fromFiles(), '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code, plan.stdout).toBe(0);
  });

  it('JSON metadata spelled with other spacing than the server keeps: an update beside it does not show it', async () => {
    const dir = manifestDir({ 'p.yaml': 'kind: IPPolicy\nname: office\ndescription: office\nmetadata: \'{"team": "net", "tier": 1}\'\n' });
    await r.apply(['-f', dir, '--stack', 'meta']);
    const live = (await s.get('/ip_policies')).body.ip_policies.find((p: any) => p.description === 'office');
    expect((await s.patch(`/ip_policies/${live.id}`, { description: 'changed by hand' })).status).toBe(200);
    const text = await r.run(['plan', '-f', dir, '--stack', 'meta']);
    expect(text.stdout).toContain('~ description = "changed by hand" -> "office"');
    expect(text.stdout).not.toContain('metadata');
    const change = (await r.planJson(['-f', dir, '--stack', 'meta'])).resource_changes[0].change;
    expect(change.after.metadata).toBe(change.before.metadata);
  });

  it('a field left empty in YAML (null) is no value, as the API reads it: the same as leaving it out', async () => {
    const empty = manifestDir({ 'n.yaml': 'kind: HTTPResponseBackend\nname: n\ndescription:\nheaders: ~\nstatus_code:\n---\nkind: IPPolicy\nname: n\nmetadata:\nrules:\n' });
    const omitted = manifestDir({ 'n.yaml': 'kind: HTTPResponseBackend\nname: n\n---\nkind: IPPolicy\nname: n\n' });
    await r.apply(['-f', empty, '--stack', 'nulls']);
    for (const dir of [empty, omitted]) {
      const plan = await r.run(['plan', '-f', dir, '--stack', 'nulls', '--detailed-exitcode']);
      expect(plan.stdout).toContain(NO_CHANGES);
      expect(plan.code, plan.stdout).toBe(0);
    }
  });

  it('an IPv6 hostport spelled the long way: apply stores the RFC 5952 form, and plan after it is empty', async () => {
    const dir = manifestDir({ 'e.yaml': 'kind: TCPEdge\nname: v6\nhostports: ["[2001:0DB8:0007:0:0:0:0:0001]:0443"]\n' });
    await r.apply(['-f', dir, '--stack', 'v6']);
    const live = (await s.get('/edges/tcp')).body.tcp_edges.filter((e: any) => e.hostports.includes('[2001:db8:7::1]:443'));
    expect(live).toHaveLength(1);
    const plan = await r.run(['plan', '-f', dir, '--stack', 'v6', '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code, plan.stdout).toBe(0);
  });

  it('and the other way round, from a fresh stack', async () => {
    await r.apply(['-f', fromFiles(), '--stack', 'files']);
    // Another stack holds the same names: each is its own resource, so use its stack.
    const plan = await r.run(['plan', '-f', inline(), '--stack', 'files', '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code, plan.stdout).toBe(0);
  });
});
