// The provider as a plugin: its schema as terraform reports it, its diagnostics, and its
// handshake (AutoMTLS with a certificate made on every launch).
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { fromJSON } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalog } from '../../provider/catalog/index.js';
import { makePluginCert } from '../../provider/terraform/plugin-cert.js';
import { providerSchemaJson, PROVIDER_ADDRESS } from '../../provider/terraform/schema-out.js';
import { resourceTypes } from '../../provider/terraform/schema.js';
import { startProxy } from '../helpers/proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { hasTerraform, providerDir, workspace, type Workspace } from '../helpers/terraform.js';

describe('plugin certificate', () => {
  it('makes certificates OpenSSL accepts, every time (a non-minimal DER integer once failed 1 launch in 250)', () => {
    for (let i = 0; i < 400; i++) {
      const c = makePluginCert();
      const x = new crypto.X509Certificate(c.certPem);
      expect(x.verify(x.publicKey)).toBe(true);
      expect(x.checkHost('localhost')).toBe('localhost');
      tls.createSecureContext({ cert: c.certPem, key: c.keyPem });
      expect(Buffer.from(c.handshakeField, 'base64').equals(x.raw)).toBe(true);
      expect(c.handshakeField).not.toMatch(/=/);
      // The serial: no redundant leading zero byte.
      expect(x.serialNumber).not.toMatch(/^00[0-7]/);
    }
  });
});

function providerClient() {
  const root = new protobuf.Root();
  for (const f of ['tfplugin6.proto', 'plugin.proto']) protobuf.parse(fs.readFileSync(path.join('provider/terraform/proto', f), 'utf8'), root, { keepCase: true });
  return grpc.loadPackageDefinition(fromJSON(root.toJSON(), { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true })) as any;
}

/** Launches the built provider as terraform does and completes one TLS gRPC call and the shutdown. */
async function launchOnce(exe: string, defs: any): Promise<void> {
  const client = makePluginCert();
  const child = execFile(exe, [], {
    env: { ...process.env, TF_PLUGIN_MAGIC_COOKIE: 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2', PLUGIN_PROTOCOL_VERSIONS: '6,5', PLUGIN_CLIENT_CERT: client.certPem },
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    child.on('exit', () => reject(new Error(`exited before the handshake; stdout ${JSON.stringify(out)}`)));
  });
  const [core, proto, network, address, kind, cert] = line.split('|');
  expect([core, proto, network, kind]).toEqual(['1', '6', 'tcp', 'grpc']);
  const der = Buffer.from(cert, 'base64');
  const serverPem = new crypto.X509Certificate(der).toString();
  const creds = grpc.credentials.createSsl(Buffer.from(serverPem), Buffer.from(client.keyPem), Buffer.from(client.certPem));
  const opts = { 'grpc.ssl_target_name_override': 'localhost' };
  const provider = new defs.tfplugin6.Provider(address, creds, opts);
  const schema = await new Promise<any>((resolve, reject) => provider.GetProviderSchema({}, (e: Error, r: unknown) => (e ? reject(e) : resolve(r))));
  expect(Object.keys(schema.resource_schemas).length).toBe(resourceTypes.length);
  const controller = new defs.plugin.GRPCController(address, creds, opts);
  await new Promise((resolve, reject) => controller.Shutdown({}, (e: Error, r: unknown) => (e ? reject(e) : resolve(r))));
  expect(await exited).toBe(0);
  provider.close();
  controller.close();
}

describe('plugin handshake', () => {
  it('serves mutual TLS with the printed certificate and exits on Shutdown, launch after launch', async () => {
    const exe = path.join(await providerDir(), 'terraform-provider-edgeform');
    const defs = providerClient();
    for (let i = 0; i < 25; i++) await launchOnce(exe, defs);
  });

  it('refuses to run outside terraform (no magic cookie), saying why on stderr', async () => {
    const exe = path.join(await providerDir(), 'terraform-provider-edgeform');
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(exe, [], { env: { PATH: process.env.PATH } }, (e, stdout, stderr) => resolve({ code: (e as { code?: number })?.code ?? 0, stdout, stderr })));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/Terraform plugin/);
  });
});

describe.skipIf(!hasTerraform)('provider schema and diagnostics through terraform', () => {
  let s: TestServer;
  let tf: Workspace;
  beforeAll(async () => {
    s = await startTestServer();
    tf = await workspace(s);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('reports the schema generated from the catalog, as `terraform providers schema -json` prints it', async () => {
    tf.write('');
    const r = await tf.ok(['providers', 'schema', '-json']);
    expect(JSON.parse(r.stdout)).toEqual(providerSchemaJson());
    const schemas = providerSchemaJson().provider_schemas[PROVIDER_ADDRESS].resource_schemas as Record<string, any>;
    for (const kind of catalog.filter((k) => k.operations.includes('create'))) {
      const block = schemas[`edgeform_${kind.type}`]?.block;
      expect(block, kind.kind).toBeDefined();
      for (const module of Object.keys(kind.modules)) expect(block.block_types?.[module]?.nesting_mode, `${kind.kind}.${module}`).toBe('single');
      // Editors show these on hover, and docs generators print them.
      expect(block.description, kind.kind).toBe(kind.summary);
    }
    // So does every attribute and nested block: none is left without a description.
    const undescribed: string[] = [];
    const walk = (b: any, at: string) => {
      for (const [name, a] of Object.entries<any>(b.attributes ?? {})) if (!a.description) undescribed.push(`${at}.${name}`);
      for (const [name, t] of Object.entries<any>(b.block_types ?? {})) {
        if (!t.block.description) undescribed.push(`${at}.${name}`);
        walk(t.block, `${at}.${name}`);
      }
    };
    for (const [type, s] of Object.entries(schemas)) walk(s.block, type);
    expect(undescribed).toEqual([]);
  });

  it('shows an API error with its message, operation id and the attribute it concerns', async () => {
    tf.write(`resource "edgeform_weighted_backend" "w" {
  backends = { "bkdtg_000000000ZZZZZZZZZZZZZZZZZZ" = 10 }
}
`);
    const r = await tf.run('apply', '-auto-approve');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Creating edgeform_weighted_backend: backends: tunnel group backend or .* does not exist/i);
    expect(r.stderr).toMatch(/Operation id: op_[0-9A-Za-z]{27}/);
    expect(r.stderr).toContain('with edgeform_weighted_backend.w');
    expect(r.stderr).toContain('backends = {');
  });

  it('validates configuration against the catalog before calling the API', async () => {
    tf.write(`resource "edgeform_ip_policy_rule" "r" {
  ip_policy_id = "ipp_000000000ZZZZZZZZZZZZZZZZZZ"
  cidr = "10.0.0.1/8"
  action = "allow"
}
resource "edgeform_ip_policy" "long" {
  description = "${'x'.repeat(256)}"
}
resource "edgeform_tls_certificate" "generated" {
  certificate_pem = "-----BEGIN CERTIFICATE-----"
  private_key_pem = null # sensitive
}
`);
    const r = await tf.run('validate');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cidr: .*host bits/i);
    expect(r.stderr).toContain('cidr = "10.0.0.1/8"');
    // One problem, one diagnostic: a too-long value once said "at most 255 bytes" twice.
    expect(r.stderr.match(/description: must be at most 255 bytes/g)).toHaveLength(1);
    // What -generate-config-out writes for a value the API never returns: says what to do, not zod's "received undefined".
    expect(r.stderr).toContain('private_key_pem: is required (string)');
    expect(r.stderr).not.toContain('received undefined');
    expect(s.logs.filter((l) => l.includes('ip_policy_rules'))).toEqual([]);
  });

  it('rides out 429s: every request is refused once with Retry-After, retried, and none is made twice', async () => {
    // A proxy in front of the real server refuses the first attempt of each distinct request.
    const attempts = new Map<string, number>();
    const proxy = await startProxy(s.url, {
      open: true,
      answer: ({ method, url, body }) => {
        const key = `${method} ${url} ${body}`;
        const n = attempts.get(key) ?? 0;
        attempts.set(key, n + 1);
        if (n > 0) return undefined;
        return { status: 429, headers: { 'retry-after': '1' }, body: { error_code: 'ERR_SERVICE_226', status_code: 429, msg: 'too many requests for this API key; retry in 1 s', details: {} } };
      },
    });
    try {
      const limited = await workspace({ url: proxy.url, token: s.token } as TestServer);
      limited.write(`resource "edgeform_ip_policy" "p" {
  description = "behind a rate limit"
}
resource "edgeform_ip_policy_rule" "r" {
  ip_policy_id = edgeform_ip_policy.p.id
  cidr = "198.51.100.0/24"
  action = "allow"
}
`);
      const before = s.logs.length;
      await limited.apply();
      expect((await limited.plan()).code).toBe(0);
      await limited.ok(['destroy', '-auto-approve']);
      const refused = [...attempts.keys()].map((k) => k.split(' ').slice(0, 2).join(' '));
      for (const call of ['POST /ip_policies', 'POST /ip_policy_rules', 'GET /ip_policies/', 'DELETE /ip_policy_rules/', 'DELETE /ip_policies/']) {
        expect(refused.some((r) => r.startsWith(call)), `${call} was refused and retried`).toBe(true);
      }
      expect([...attempts.values()].every((n) => n >= 2)).toBe(true);
      // Each create reached the server once: a refused POST is safe to send again.
      const served = s.logs.slice(before).map((l) => JSON.parse(l));
      expect(served.filter((l) => l.method === 'POST').map((l) => `${l.path} ${l.status}`).sort()).toEqual(['/ip_policies 201', '/ip_policy_rules 201']);
    } finally {
      await proxy.close();
    }
  });

  it('says how to configure the provider when api_url and api_key are missing', async () => {
    tf.write('resource "edgeform_ip_policy" "p" {}\n');
    const env = { ...tf.env };
    delete env.EDGEFORM_API_URL;
    delete env.EDGEFORM_API_KEY;
    const r = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile('terraform', ['plan', '-no-color'], { cwd: tf.dir, env }, (e, _o, stderr) => resolve({ code: (e as { code?: number })?.code ?? 0, stderr })));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Missing api_url');
    expect(r.stderr).toContain('EDGEFORM_API_KEY');
    // An empty value (a variable defaulting to "") is unset, as with other providers: the
    // environment applies, rather than "Missing api_key" while EDGEFORM_API_KEY is set.
    tf.write('variable "key" {\n  default = ""\n}\nprovider "edgeform" {\n  api_url = ""\n  api_key = var.key\n}\nresource "edgeform_ip_policy" "p" {}\n');
    const withEnv = await tf.run('plan', '-detailed-exitcode');
    expect(withEnv.code, withEnv.stderr).toBe(2);
  });

  it('an api_url the server has no route for (".../v1") is an error, never "the resource is gone"', async () => {
    // It once read every resource as deleted: the plan proposed to create them again, and a
    // destroy "succeeded", emptying the state and leaving everything on the server.
    const good = await workspace(s);
    good.write('resource "edgeform_ip_policy" "kept" {\n  description = "kept"\n}\n');
    await good.apply();
    const { id } = (await good.state())['edgeform_ip_policy.kept'];
    const withPath = await workspace({ url: `${s.url}/v1`, token: s.token } as TestServer, { dir: good.dir });
    for (const args of [['plan'], ['destroy', '-auto-approve', '-refresh=false']]) {
      const r = await withPath.run(...args);
      expect(r.code, `${args[0]}\n${r.stdout}`).toBe(1);
      expect(r.stderr).toMatch(/404 ERR_SERVICE_301/);
      expect(r.stderr.replace(/\s+/g, ' ')).toContain("Set api_url (or EDGEFORM_API_URL) to the server's base URL");
    }
    expect((await s.get(`/ip_policies/${id}`)).status).toBe(200);
    expect(Object.keys(await good.state())).toEqual(['edgeform_ip_policy.kept']);
    // Not a URL at all: said once, at the provider block, before any call.
    const notUrl = await workspace({ url: s.url.replace('http://', ''), token: s.token } as TestServer, { dir: good.dir });
    const r = await notUrl.run('plan');
    expect(r.code).toBe(1);
    expect(r.stderr.replace(/\s+/g, ' ')).toContain('api_url must be an http:// or https:// URL');
    expect(r.stderr).not.toContain('Invalid URL');
  });

  it('on a key the server refuses (401), points at api_key, not at the resource', async () => {
    tf.write('resource "edgeform_ip_policy" "p" {}\n');
    const r = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile('terraform', ['apply', '-auto-approve', '-no-color'], { cwd: tf.dir, env: { ...tf.env, EDGEFORM_API_KEY: 'not-a-key-of-this-server' } }, (e, _o, stderr) => resolve({ code: (e as { code?: number })?.code ?? 0, stderr })));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/401 ERR_SERVICE_\d+/);
    expect(r.stderr.replace(/\s+/g, ' ')).toContain('Check api_key in the provider "edgeform" block (or EDGEFORM_API_KEY)');
  });
});
