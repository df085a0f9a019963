// Plan after apply is empty for every manifest kind and every module (full and minimal
// forms), with secrets, references by name and by raw id, and values the server
// canonicalises (header-name case, bare IP addresses as CIDRs, hostport case).
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kindOf } from '../../provider/catalog/index.js';
import { manifestKinds } from '../../reconciler/manifest/kinds.js';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import { caPem, createRefs, moduleSamples } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SshTools } from '../helpers/ssh.js';
import { manifestDir, runCli } from '../helpers/cli.js';

type Doc = Record<string, any>;

const SECRETS = ['gh-secret', 'oidc-secret', 'whsec_0123456789', 'hook-signing-secret'];

describe('reconciler: every kind and every module', () => {
  let s: TestServer;
  let dir: string;
  let env: Record<string, string>;
  let tlsKey: string;
  let declaredMatches: string[];

  beforeAll(async () => {
    s = await startTestServer();
    const refs = await createRefs(s);
    const routeKind = kindOf('HTTPSEdgeRoute');
    const routeSamples = moduleSamples(routeKind, refs, s.url);
    const leaf = issueCertificate({ subject: { commonName: 'app.example.com' }, key: 'p256' } as never);
    tlsKey = leaf.privateKeyPem;
    const userKey = new SshTools().userKey({ type: 'ed25519' });
    const laptopKey = new SshTools().userKey({ type: 'ed25519' });
    const moduleRoutes = Object.entries(routeSamples).flatMap(([m, sample]) => [
      { match_type: 'path_prefix', match: `/${m}/full`, [m]: sample.full.input },
      { match_type: 'exact_path', match: `/${m}/minimal`, description: `only ${m}`, [m]: sample.minimal.input },
    ]);
    declaredMatches = ['/', ...moduleRoutes.map((r) => r.match)];
    const edgeModules = (kind: string, which: 'full' | 'minimal') => Object.fromEntries(Object.entries(moduleSamples(kindOf(kind), refs, s.url)).map(([m, v]) => [m, v[which].input]));
    const docs: Doc[] = [
      { kind: 'BotUser', name: 'ci-bot', active: false },
      { kind: 'APIKey', name: 'deploy', description: 'deploys', owner_id: 'BotUser/ci-bot' },
      { kind: 'Credential', name: 'agents', acl: ['bind:*.example.com'], owner_id: 'BotUser/ci-bot', metadata: '{"team":"edge"}' },
      { kind: 'SSHCredential', name: 'laptop', public_key: laptopKey, acl: ['bind:ann.example.com'], owner_id: 'BotUser/ci-bot' },
      {
        kind: 'IPPolicy',
        name: 'office',
        description: 'office networks',
        metadata: 'plain text metadata',
        rules: [
          { cidr: '203.0.113.0/24', action: 'allow', description: 'HQ' },
          { cidr: '203.0.113.66', action: 'deny' },
          { cidr: '2001:DB8::/48', action: 'allow' },
        ],
      },
      { kind: 'IPPolicy', name: 'empty' },
      { kind: 'CertificateAuthority', name: 'clients', ca_pem: caPem('Reconciler CA'), description: 'client CA' },
      { kind: 'TLSCertificate', name: 'app', certificate_pem: leaf.certificatePem, private_key_pem: '${env:TLS_KEY}' },
      { kind: 'SSHCertificateAuthority', name: 'ssh-ca', private_key_type: 'ed25519' },
      { kind: 'SSHCertificateAuthority', name: 'ssh-ca-rsa', private_key_type: 'rsa', key_size: 2048 },
      {
        kind: 'SSHUserCertificate',
        name: 'ann',
        ssh_certificate_authority_id: 'SSHCertificateAuthority/ssh-ca',
        public_key: userKey,
        principals: ['ann'],
        critical_options: { 'source-address': '10.0.0.0/8' },
        valid_after: '2026-01-01T00:00:00Z',
        valid_until: '2030-01-01T00:00:00Z',
      },
      { kind: 'TunnelGroupBackend', name: 'web', labels: { app: 'web' } },
      { kind: 'HTTPResponseBackend', name: 'maintenance', body: 'down for maintenance', status_code: 503, headers: { 'Content-Type': 'text/plain', 'Retry-After': '120' } },
      { kind: 'HTTPResponseBackend', name: 'defaults' },
      { kind: 'WeightedBackend', name: 'split', backends: { 'HTTPResponseBackend/maintenance': 10, 'TunnelGroupBackend/web': 90, [refs.backend.id]: 0 } },
      { kind: 'WeightedBackend', name: 'outer', backends: { 'WeightedBackend/split': 1 } },
      {
        kind: 'HTTPSEdge',
        name: 'web',
        description: 'every route module',
        hostports: ['App.Example.com:443'],
        mutual_tls: { certificate_authority_ids: ['CertificateAuthority/clients'] },
        tls_termination: { min_version: '1.3' },
        routes: [
          { match_type: 'path_prefix', match: '/', backend: { backend_id: 'WeightedBackend/outer' }, ip_restriction: { ip_policy_ids: ['IPPolicy/office', 'IPPolicy/empty'] } },
          ...moduleRoutes,
        ],
      },
      { kind: 'HTTPSEdge', name: 'minimal-modules', hostports: ['min.example.com:443'], ...edgeModules('HTTPSEdge', 'minimal') },
      { kind: 'HTTPSEdge', name: 'bare' },
      { kind: 'TCPEdge', name: 'ssh', hostports: ['tcp.example.com:22022'], ...edgeModules('TCPEdge', 'full') },
      { kind: 'TCPEdge', name: 'ssh-min', hostports: ['tcp.example.com:22023'], ...edgeModules('TCPEdge', 'minimal') },
      { kind: 'TLSEdge', name: 'tls', hostports: ['tls.example.com:8443'], ...edgeModules('TLSEdge', 'full') },
      { kind: 'TLSEdge', name: 'tls-min', hostports: ['tls2.example.com:8443'], ...edgeModules('TLSEdge', 'minimal') },
      // type left out, as the service's Terraform resource allows; the URL's case and default port are the server's to canonicalise.
      { kind: 'CloudEndpoint', name: 'site', url: 'https://Site.Example.com:443', description: 'answers from its policy', traffic_policy: 'on_http_request:\n  - expressions: ["req.path == \'/health\'"]\n    actions: [{type: custom-response, config: {status_code: 200, body: ok}}]\n  - actions: [{type: deny, config: {status_code: 404}}]\n' },
      { kind: 'CloudEndpoint', name: 'api-a', url: 'https://api.internal', pooling_enabled: true, traffic_policy: '{"on_http_request":[{"actions":[{"type":"custom-response","config":{"status_code":200,"body":"a"}}]}]}' },
      { kind: 'CloudEndpoint', name: 'api-b', type: 'cloud', url: 'https://api.internal', bindings: ['internal'], pooling_enabled: true, traffic_policy: '{"on_http_request":[{"actions":[{"type":"custom-response","config":{"status_code":200,"body":"b"}}]}]}' },
      { kind: 'CloudEndpoint', name: 'raw', url: 'tcp://raw.example.com:9000', traffic_policy: 'on_tcp_connect: [{actions: [{type: deny}]}]' },
      { kind: 'EventDestination', name: 'hook', target: { http: { url: 'https://hooks.example.com/edgeform', secret: 'hook-signing-secret' } } },
      { kind: 'EventDestination', name: 'log', target: { log: {} } },
      { kind: 'EventSubscription', name: 'changes', sources: [{ type: 'ip_policy_created.v0' }, { type: 'https_edge_updated.v0' }], destination_ids: ['EventDestination/hook', 'EventDestination/log'] },
    ];
    // Every manifest kind appears, so a new kind without a case here fails this suite.
    expect(new Set(docs.map((d) => d.kind))).toEqual(new Set(manifestKinds.map((k) => k.kind)));
    dir = manifestDir({ 'stack.yaml': docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n') });
    env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, TLS_KEY: tlsKey };
  });

  afterAll(async () => {
    await s?.close();
  });

  const outputs: string[] = [];
  const run = async (args: string[]) => {
    const r = await runCli(args, env);
    outputs.push(r.stdout, r.stderr);
    return r;
  };

  it('applies from nothing', async () => {
    const r = await run(['apply', '-f', dir, '--auto-approve']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Apply complete! Resources: \d+ added, 0 changed, 0 destroyed\./);
    // Routes are created one after another: the edge lists them (oldest first) as declared.
    const edges = (await s.get('/edges/https')).body.https_edges;
    const web = edges.find((e: Doc) => e.description === 'every route module');
    expect(web.routes.map((r: Doc) => r.match)).toEqual(declaredMatches);
  });

  it('then plans no changes, in text and in JSON, for every resource and child', async () => {
    const text = await run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(text.stdout, text.stdout).toContain('No changes. Your infrastructure matches the configuration.');
    expect(text.code).toBe(0);
    const json = await run(['plan', '-f', dir, '--json']);
    const plan = json.json();
    const changed = plan.resource_changes.filter((c: Doc) => c.change.actions[0] !== 'no-op');
    expect(changed.map((c: Doc) => ({ address: c.address, before: c.change.before, after: c.change.after }))).toEqual([]);
    // Every declared document and child is accounted for.
    const routes = plan.resource_changes.filter((c: Doc) => c.kind === 'HTTPSEdgeRoute');
    expect(routes.length).toBe(1 + 2 * Object.keys(kindOf('HTTPSEdgeRoute').modules).length);
    expect(plan.resource_changes.filter((c: Doc) => c.kind === 'IPPolicyRule')).toHaveLength(3);
  });

  it('applies again as a no-op, making no write calls', async () => {
    const r = await run(['apply', '-f', dir, '--auto-approve', '--json']);
    expect(r.code).toBe(0);
    expect(r.json().applied).toEqual({ add: 0, change: 0, destroy: 0 });
  });

  it('never prints a secret', () => {
    const all = outputs.join('\n');
    for (const secret of [...SECRETS, tlsKey.split('\n')[1]]) expect(all).not.toContain(secret);
    expect(all).toContain('(sensitive value)');
  });

  it('changes a secret alone as an update of the field that holds it', async () => {
    const file = path.join(dir, 'stack.yaml');
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('hook-signing-secret', 'rotated-signing-secret'));
    const r = await run(['plan', '-f', dir, '--json']);
    const changed = r.json().resource_changes.filter((c: Doc) => c.change.actions[0] !== 'no-op');
    expect(changed.map((c: Doc) => [c.address, c.change.actions, c.change.sensitive_changed])).toEqual([['EventDestination/hook', ['update'], true]]);
    expect(r.stdout).not.toContain('rotated-signing-secret');
    const a = await run(['apply', '-f', dir, '--auto-approve']);
    expect(a.code, a.stdout + a.stderr).toBe(0);
    const again = await run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(again.code, again.stdout).toBe(0);
  });
});
