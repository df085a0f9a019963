// `edgeform export` writes manifests for live resources made outside edgeform, such that
// `plan` on them right away shows no changes; write-only values become ${env:...}
// placeholders; `--adopt` stamps the resources so that the stack manages them from then on.
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { caPem, TCP_POLICY } from '../helpers/edge-fixtures.js';
import { activeChanges, NO_CHANGES, type StackRunner, stackRunner } from '../helpers/reconciler.js';

type Doc = Record<string, any>;
const SECRETS = { oauth: 'export-oauth-secret-51f0', webhook: 'whsec_export_secret_77d2', hook: 'export-hook-secret-0c9a' };

describe('reconciler: export', () => {
  let s: TestServer;
  let r: StackRunner;
  let tlsKey: string;
  const ids: Record<string, string> = {};

  const post = async (p: string, body: Doc) => {
    const res = await s.post(p, body);
    if (res.status !== 201) throw new Error(`POST ${p}: ${res.status} ${res.text}`);
    return res.body.id as string;
  };

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s);
    // Everything made through the API directly, as a user would before adopting edgeform.
    ids.office = await post('/ip_policies', { description: 'Office networks', metadata: '{"team":"net"}' });
    await post('/ip_policy_rules', { ip_policy_id: ids.office, cidr: '203.0.113.0/24', action: 'allow', description: 'HQ' });
    await post('/ip_policy_rules', { ip_policy_id: ids.office, cidr: '2001:db8::/48', action: 'deny' });
    ids.vpn = await post('/ip_policies', { description: 'vpn' });
    ids.agents = await post('/backends/tunnel_group', { labels: { app: 'web', tier: 'front' } });
    ids.page = await post('/backends/http_response', { body: 'maintenance', status_code: 503, headers: { 'Retry-After': '60' } });
    ids.split = await post('/backends/weighted', { description: 'split', backends: { [ids.agents]: 90, [ids.page]: 10 } });
    ids.outer = await post('/backends/weighted', { backends: { [ids.split]: 1 } });
    ids.ca = await post('/certificate_authorities', { ca_pem: caPem('export CA'), description: 'client CA' });
    const leaf = issueCertificate({ subject: { commonName: 'app.example.com' }, key: 'p256' } as never);
    tlsKey = leaf.privateKeyPem;
    ids.cert = await post('/tls_certificates', { certificate_pem: leaf.certificatePem, private_key_pem: tlsKey, description: 'app cert' });
    ids.edge = await post('/edges/https', { description: 'web', hostports: ['app.example.com:443'], mutual_tls: { certificate_authority_ids: [ids.ca] }, tls_termination: { min_version: '1.3' } });
    await post(`/edges/https/${ids.edge}/routes`, {
      match_type: 'path_prefix',
      match: '/',
      backend: { backend_id: ids.outer },
      ip_restriction: { ip_policy_ids: [ids.office, ids.vpn] },
      oauth: { provider: { github: { client_id: 'Iv1.export', client_secret: SECRETS.oauth, organizations: ['acme'] } } },
      request_headers: { add: { 'X-Edge': 'web' } },
    });
    await post(`/edges/https/${ids.edge}/routes`, { match_type: 'exact_path', match: '/hooks', backend: { backend_id: ids.agents }, webhook_verification: { provider: 'stripe', secret: SECRETS.webhook } });
    await post('/edges/tcp', { hostports: ['tcp.example.com:22022'], backend: { backend_id: ids.agents }, ip_restriction: { ip_policy_ids: [ids.office] }, traffic_policy: { value: TCP_POLICY } });
    await post('/edges/tls', { hostports: ['tls.example.com:8443'], backend: { backend_id: ids.split }, tls_termination: { terminate_at: 'agent' } });
    await post('/event_destinations', { description: 'hook', target: { http: { url: 'https://hooks.example.com/x', secret: SECRETS.hook } } });
    ids.site = await post('/endpoints', { url: 'https://site.example.com', description: 'site', traffic_policy: 'on_http_request:\n  - actions: [{type: custom-response, config: {status_code: 200, body: ok}}]\n' });
    // Another stack's resource: export leaves it to that stack.
    const theirs = manifestDir({ 'theirs.yaml': 'kind: IPPolicy\nname: theirs\ndescription: theirs\n' });
    await stackRunner(s, { EDGEFORM_STACK: 'other' }).apply(['-f', theirs]);
  });
  afterAll(async () => {
    await s?.close();
  });

  let exported: string;
  let docs: Doc[];
  let secretEnv: Record<string, string>;

  it('writes a document per resource, references as Kind/name, and placeholders for write-only values', async () => {
    const res = await r.run(['export']);
    expect(res.code, res.stderr).toBe(0);
    exported = res.stdout;
    docs = parseAllDocuments(exported).map((d) => d.toJS());
    expect(docs.map((d) => d.kind).sort()).toEqual(
      // The API key is the server's first one, which these requests use.
      ['APIKey', 'CertificateAuthority', 'CloudEndpoint', 'EventDestination', 'HTTPResponseBackend', 'HTTPSEdge', 'IPPolicy', 'IPPolicy', 'TCPEdge', 'TLSCertificate', 'TLSEdge', 'TunnelGroupBackend', 'WeightedBackend', 'WeightedBackend'].sort(),
    );
    expect(res.stderr).toMatch(/ipp_\w+ is managed by stack "other" \(as IPPolicy\/theirs\); export it from there/);
    const byId = new Map(docs.map((d) => [d.id, d]));
    const addr = (id: string) => `${byId.get(id)!.kind}/${byId.get(id)!.name}`;
    expect(byId.get(ids.office)).toMatchObject({ description: 'Office networks', metadata: '{"team":"net"}', rules: [{ cidr: '203.0.113.0/24', action: 'allow', description: 'HQ' }, { cidr: '2001:db8::/48', action: 'deny' }] });
    expect(byId.get(ids.split)!.backends).toEqual({ [addr(ids.agents)]: 90, [addr(ids.page)]: 10 });
    expect(byId.get(ids.outer)!.backends).toEqual({ [addr(ids.split)]: 1 });
    // type and pooling at their defaults are left out, as a written manifest would.
    expect(byId.get(ids.site)).toMatchObject({ kind: 'CloudEndpoint', name: 'https-site.example.com', url: 'https://site.example.com', description: 'site', traffic_policy: expect.stringContaining('custom-response') });
    expect(byId.get(ids.site)).not.toHaveProperty('type');
    const edge = byId.get(ids.edge)!;
    expect(edge.mutual_tls).toMatchObject({ certificate_authority_ids: [addr(ids.ca)] });
    expect(edge.routes.map((x: Doc) => x.match)).toEqual(['/', '/hooks']);
    expect(edge.routes[0].backend.backend_id).toBe(addr(ids.outer));
    expect(edge.routes[0].ip_restriction.ip_policy_ids).toEqual([addr(ids.office), addr(ids.vpn)]);
    // Required write-only values: a placeholder each, and a comment saying what to set. (The
    // destination's optional secret cannot be told from its absence: the API returns null.)
    const placeholders = [...exported.matchAll(/\$\{env:(EDGEFORM_SECRET_\w+)\}/g)].map((m) => m[1]);
    expect(placeholders).toHaveLength(3);
    expect(edge.routes[0].oauth.provider.github.client_secret).toMatch(/^\$\{env:EDGEFORM_SECRET_\w+\}$/);
    expect(edge.routes[1].webhook_verification.secret).toMatch(/^\$\{env:EDGEFORM_SECRET_\w+\}$/);
    expect(byId.get(ids.cert)!.private_key_pem).toMatch(/^\$\{env:EDGEFORM_SECRET_\w+\}$/);
    for (const p of placeholders) expect(exported).toContain(`# ${p}: a write-only value the API never returns; set it before plan or apply`);
    secretEnv = Object.fromEntries(placeholders.map((p) => [p, p.includes('PRIVATE_KEY') ? tlsKey : 'anything']));
  });

  it('plans no changes on what it exported', async () => {
    const dir = manifestDir({ 'exported.yaml': exported });
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode'], secretEnv);
    expect(plan.stdout, plan.stderr).toContain(NO_CHANGES);
    expect(plan.code).toBe(0);
  });

  it('leaves exported resources unmanaged without --adopt: a changed document is refused, not applied', async () => {
    const dir = manifestDir({ 'exported.yaml': exported.replace('description: vpn', 'description: remote access') });
    const plan = await r.run(['plan', '-f', dir], secretEnv);
    expect(plan.code).toBe(1);
    expect(plan.stderr).toMatch(/IPPolicy\/\S+ is bound to ipp_\w+, which edgeform does not manage, and the manifest differs from it; pass --adopt/);
  });

  it('plan --adopt on what it exported only stamps: an update per resource, adopted into the stack', async () => {
    const dir = manifestDir({ 'exported.yaml': exported });
    const p = await r.planJson(['-f', dir, '--adopt'], secretEnv);
    const active = Object.values(activeChanges(p));
    expect(active).toHaveLength(docs.length);
    for (const c of active) {
      expect(c.adopt, c.address).toBe(true);
      expect(c.change.actions).toEqual(['update']);
      expect(c.change.before).toEqual(c.change.after);
    }
  });

  it('with --adopt stamps the resources into the stack, which then manages them: plans, updates, prunes', async () => {
    const res = await r.run(['export', '--adopt', '--stack', 'web', '-o', path.join(manifestDir({}), 'web.yaml')]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain('Adopted 14 resources into stack "web".');
    const file = res.stderr.match(/Wrote 14 documents to (\S+)\./)![1];
    const adopted = fs.readFileSync(file, 'utf8');
    // The stamp identifies them now: no id lines.
    expect(adopted).not.toMatch(/^id: /m);
    const dir = path.dirname(file);
    const web = stackRunner(s, { EDGEFORM_STACK: 'web', ...secretEnv });
    expect((await web.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
    const office = (await s.get(`/ip_policies/${ids.office}`)).body;
    expect(JSON.parse(office.metadata)).toMatchObject({ team: 'net', edgeform: { stack: 'web', name: expect.stringMatching(/^IPPolicy\//) } });
    // Managed: a changed description is an update; a document removed is pruned.
    const vpnDoc = docs.find((d) => d.id === ids.vpn)!;
    const edited = adopted.replace('description: vpn', 'description: remote access');
    fs.writeFileSync(file, edited);
    const p = activeChanges(await web.planJson(['-f', dir]));
    expect(Object.keys(p)).toEqual([`IPPolicy/${vpnDoc.name}`]);
    await web.apply(['-f', dir]);
    expect((await s.get(`/ip_policies/${ids.vpn}`)).body.description).toBe('remote access');
    const tcp = docs.find((d) => d.kind === 'TCPEdge')!;
    const withoutTcp = edited.split(/^---\n/m).filter((d) => !d.includes('kind: TCPEdge')).join('---\n');
    fs.writeFileSync(file, withoutTcp);
    const pruned = await web.run(['apply', '-f', dir, '--prune', '--auto-approve']);
    expect(pruned.code, pruned.stdout + pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain(`# TCPEdge/${tcp.name} will be destroyed`);
    expect(pruned.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 1 destroyed.');
    expect((await s.get(`/edges/tcp/${tcp.id}`)).status).toBe(404);
    expect((await web.run(['plan', '-f', dir, '--prune', '--detailed-exitcode'])).code).toBe(0);
    // The default stack's export now leaves them to stack "web".
    const again = await r.run(['export', '--kind', 'IPPolicy']);
    expect(again.stdout.trim()).toBe('');
    expect(again.stderr).toContain('is managed by stack "web"');
  });

  it('never printed a write-only value', () => {
    const all = [...r.outputs, exported].join('\n');
    for (const secret of Object.values(SECRETS)) expect(all).not.toContain(secret);
    expect(all).not.toContain(tlsKey.split('\n')[1]);
  });
});
