// Secrets never appear in any output: plan and apply, text and --json, drift, a changed
// secret, a refused call, refresh-only, destroy, export and validate. They go to the API
// (the resources work); a saved plan holds only their fingerprints.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { NO_CHANGES, type StackRunner, stackRunner, toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

const leaf = issueCertificate({ subject: { commonName: 'secret.example.com' }, key: 'p256' } as never);
const otherKey = issueCertificate({ subject: { commonName: 'other.example.com' }, key: 'p256' } as never).privateKeyPem;
/** Each secret, and the environment variable the manifest reads it from. */
const SECRETS: Record<string, string> = {
  OAUTH_SECRET: 'oauth-client-secret-3d5f9a',
  OIDC_SECRET: 'oidc-client-secret-8e21c4',
  WEBHOOK_SECRET: 'whsec_webhook_secret_b7a0e1',
  HOOK_SECRET: 'destination-signing-secret-6c2d',
  TLS_KEY: leaf.privateKeyPem,
};
/** What would give a secret away: each value, and each line of the private key's body. */
const tells = (env: Record<string, string>) =>
  Object.values(env).flatMap((v) => (v.includes('PRIVATE KEY') ? v.split('\n').filter((l) => l && !l.startsWith('-----')) : [v]));

const docs: Doc[] = [
  { kind: 'TunnelGroupBackend', name: 'app', labels: { app: 'web' } },
  { kind: 'TLSCertificate', name: 'app', certificate_pem: leaf.certificatePem, private_key_pem: '${env:TLS_KEY}' },
  { kind: 'EventDestination', name: 'hook', target: { http: { url: 'https://hooks.example.com/in', secret: '${env:HOOK_SECRET}' } } },
  {
    kind: 'HTTPSEdge',
    name: 'web',
    hostports: ['secret.example.com:443'],
    routes: [
      { match_type: 'path_prefix', match: '/', backend: { backend_id: 'TunnelGroupBackend/app' }, oauth: { provider: { github: { client_id: 'Iv1.secret', client_secret: '${env:OAUTH_SECRET}' } } } },
      { match_type: 'path_prefix', match: '/staff', backend: { backend_id: 'TunnelGroupBackend/app' }, oidc: { issuer: 'https://login.example.com', client_id: 'staff', client_secret: '${env:OIDC_SECRET}' } },
      { match_type: 'exact_path', match: '/hooks', backend: { backend_id: 'TunnelGroupBackend/app' }, webhook_verification: { provider: 'stripe', secret: '${env:WEBHOOK_SECRET}' } },
    ],
  },
];

describe('reconciler: secrets never appear in output', () => {
  let s: TestServer;
  let r: StackRunner;
  let dir: string;
  const env: Record<string, string> = { ...SECRETS };
  const used = new Set<string>();
  const run = async (args: string[], extra: Record<string, string | undefined> = {}) => {
    for (const t of tells({ ...env, ...(extra as Record<string, string>) })) used.add(t);
    return r.run(args, { ...env, ...extra });
  };

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s, { EDGEFORM_STACK: 'secrets' });
    dir = manifestDir({ 'stack.yaml': toYaml(docs) });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('validate, plan and apply, text and --json, show "(sensitive value)" in place of each secret', async () => {
    expect((await run(['validate', '-f', dir])).code).toBe(0);
    const plan = await run(['plan', '-f', dir]);
    expect(plan.stdout).toContain('Plan: 7 to add, 0 to change, 0 to destroy.');
    // Unquoted, as Terraform shows it: a marker, not the value.
    expect(plan.stdout).toMatch(/\+ private_key_pem += \(sensitive value\)\n/);
    const json = await run(['plan', '-f', dir, '--json']);
    const byAddress = Object.fromEntries(json.json().resource_changes.map((c: Doc) => [c.address, c.change.after]));
    expect(byAddress['HTTPSEdge/web.routes["/"]'].oauth.provider.github.client_secret).toBe('(sensitive value)');
    expect(byAddress['EventDestination/hook'].target.http.secret).toBe('(sensitive value)');
    expect(byAddress['HTTPSEdge/web.routes["/staff"]'].oidc.client_secret).toBe('(sensitive value)');
    expect(byAddress['HTTPSEdge/web.routes["/hooks"]'].webhook_verification.secret).toBe('(sensitive value)');
    expect(byAddress['TLSCertificate/app'].private_key_pem).toBe('(sensitive value)');
    const applied = await run(['apply', '-f', dir, '--auto-approve']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect((await run(['apply', '-f', dir, '--auto-approve', '--json'])).code).toBe(0);
    expect((await run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('a changed secret is an update shown only as "(sensitive value)", and is applied', async () => {
    const plan = await run(['plan', '-f', dir], { OAUTH_SECRET: 'rotated-oauth-secret-41aa', WEBHOOK_SECRET: 'whsec_rotated_9c3e' });
    expect(plan.stdout).toContain('# HTTPSEdge/web.routes["/"] will be updated in-place');
    expect(plan.stdout).toContain('# HTTPSEdge/web.routes["/hooks"] will be updated in-place');
    expect(plan.stdout).toContain('~ (sensitive value)');
    expect(plan.stdout).toContain('Plan: 0 to add, 2 to change, 0 to destroy.');
    const json = await run(['plan', '-f', dir, '--json'], { OAUTH_SECRET: 'rotated-oauth-secret-41aa', WEBHOOK_SECRET: 'whsec_rotated_9c3e' });
    const route = json.json().resource_changes.find((c: Doc) => c.address === 'HTTPSEdge/web.routes["/"]');
    expect(route.change).toMatchObject({ actions: ['update'], sensitive_changed: true });
    Object.assign(env, { OAUTH_SECRET: 'rotated-oauth-secret-41aa', WEBHOOK_SECRET: 'whsec_rotated_9c3e' });
    const applied = await run(['apply', '-f', dir, '--auto-approve']);
    expect(applied.stdout).toContain('Apply complete! Resources: 0 added, 2 changed, 0 destroyed.');
    expect((await run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
  });

  it('a private key that the API refuses is reported without the key, and the certificate it was to replace stays', async () => {
    const refused = await run(['apply', '-f', dir, '--auto-approve'], { TLS_KEY: otherKey });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/Error: TLSCertificate\/app: create failed \(HTTP 400 ERR_SERVICE_\d+\): .*private key does not match/);
    // The replacement creates first: the old certificate is still there.
    expect((await s.get('/tls_certificates')).body.tls_certificates).toHaveLength(1);
  });

  it('drift, refresh-only, export, destroy and a saved plan print no secret either', async () => {
    const edge = (await s.get('/edges/https')).body.https_edges[0];
    const route = edge.routes.find((x: Doc) => x.match === '/');
    expect((await s.patch(`/edges/https/${edge.id}/routes/${route.id}`, { description: 'drifted' })).status).toBe(200);
    const hook = (await s.get('/event_destinations')).body.event_destinations[0];
    expect((await s.patch(`/event_destinations/${hook.id}`, { description: 'drifted' })).status).toBe(200);
    const refresh = await run(['plan', '-f', dir, '--refresh-only']);
    expect(refresh.stdout).toContain('# EventDestination/hook will be updated in-place (changed outside edgeform since the last apply)');
    expect((await run(['plan', '-f', dir, '--json'])).json().changes).toBe(true);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-secret-plan-'));
    const file = path.join(tmp, 'p.plan');
    expect((await run(['plan', '-f', dir, '--out', file])).code).toBe(0);
    expect((await run(['apply', file])).code).toBe(0);
    expect((await run(['export'])).code).toBe(0);
    expect((await run(['destroy', '-f', dir, '--json'])).code).toBe(2);
    const destroyed = await run(['destroy', '-f', dir, '--auto-approve']);
    expect(destroyed.code, destroyed.stdout + destroyed.stderr).toBe(0);
    // The saved plan holds no secret: fingerprints, and where to read the values again.
    expect(fs.readFileSync(file, 'utf8')).not.toContain(env.OAUTH_SECRET);
    expect(fs.readFileSync(file, 'utf8')).not.toContain(env.WEBHOOK_SECRET);
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('validate problems about secret fields do not quote them', async () => {
    const bad = manifestDir({ 'bad.yaml': toYaml([{ kind: 'TLSCertificate', name: 'bad', certificate_pem: leaf.certificatePem, private_key_pem: '${env:BAD_KEY}' }, { kind: 'HTTPSEdge', name: 'e', routes: [{ match_type: 'path_prefix', match: '/', webhook_verification: { provider: 'stripe', secret: '${env:LONG_SECRET}' } }] }]) });
    const badKey = `-----BEGIN PRIVATE KEY-----\nbm90LWEta2V5LXNlY3JldC1tYXRlcmlhbA==\n-----END PRIVATE KEY-----\n`;
    const longSecret = `whsec_${'x'.repeat(5000)}`;
    const res = await run(['validate', '-f', bad], { BAD_KEY: badKey, LONG_SECRET: longSecret });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/bad\.yaml:\d+: /);
    const json = await run(['validate', '-f', bad, '--json'], { BAD_KEY: badKey, LONG_SECRET: longSecret });
    expect(json.code).toBe(1);
  });

  it('not one secret appeared in any stdout or stderr', () => {
    const all = r.outputs.join('\n');
    expect(r.outputs.length).toBeGreaterThan(20);
    for (const t of used) expect(all.includes(t), `a secret appeared in the output: ${t.slice(0, 12)}...`).toBe(false);
  });
});
