// Terraform 1.11 write-only arguments: `X_wo` with `X_wo_version` keeps a secret out of the
// state and the plan altogether; the provider sends it from the configuration, and a new
// version sends it again. Checked through the real terraform binary, and against what the
// server sealed (opened here with the test server's key).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/store/secret-box.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';
import { hasTerraform, workspace } from '../helpers/terraform.js';

describe.skipIf(!hasTerraform)('write-only arguments', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ secretKey: TEST_SECRET_KEY });
  });
  afterAll(() => server?.close());

  /** The write-only values the server holds for a resource (its sealed fields). */
  const sealedOf = async (id: string) => {
    const row = await server.server.db.prisma.resource.findUnique({ where: { id } });
    return row?.sealed ? JSON.stringify(JSON.parse(SecretBox.fromKey(TEST_SECRET_KEY).open(row.sealed))) : '';
  };

  const config = (secret: string, version: number, description = 'hooks') => `resource "edgeform_http_response_backend" "ok" {
  body = "ok"
}
resource "edgeform_https_edge" "web" {
  hostports = ["wo.example.com:443"]
}
resource "edgeform_https_edge_route" "hooks" {
  edge_id     = edgeform_https_edge.web.id
  match_type  = "path_prefix"
  match       = "/hooks"
  description = "${description}"
  backend {
    backend_id = edgeform_http_response_backend.ok.id
  }
  oidc {
    issuer                   = "https://accounts.example.com"
    client_id                = "app"
    client_secret_wo         = "${secret}"
    client_secret_wo_version = ${version}
  }
}
`;

  it('sends the secret, never stores it in the state or the plan, and sends a new version again', async () => {
    const tf = await workspace(server);
    tf.write(config('first-secret-value', 1));
    await tf.apply();
    const stateText = fs.readFileSync(path.join(tf.dir, 'terraform.tfstate'), 'utf8');
    expect(stateText).not.toContain('first-secret-value');
    const route = (await tf.state())['edgeform_https_edge_route.hooks'];
    expect(route.oidc[0]?.client_secret_wo ?? route.oidc.client_secret_wo ?? null).toBeNull();
    expect(await sealedOf(route.id)).toContain('first-secret-value');
    // Unchanged version: no change planned, though the value cannot be compared.
    expect((await tf.plan()).code).toBe(0);
    // Another field changes: the module is sent again, still with its secret.
    tf.write(config('first-secret-value', 1, 'webhooks'));
    await tf.apply();
    expect(await sealedOf(route.id)).toContain('first-secret-value');
    // A saved plan holds no secret either.
    tf.write(config('second-secret-value', 2, 'webhooks'));
    const planned = await tf.ok(['plan', '-input=false', '-out=tfplan'], [0]);
    expect(planned.stdout).toMatch(/client_secret_wo_version\s+=\s+1 -> 2/);
    const show = JSON.parse((await tf.ok(['show', '-json', 'tfplan'])).stdout);
    // The plan's values hold no secret (the configuration section repeats the HCL source, where
    // this test wrote it as a literal; real configurations pass it through an ephemeral variable).
    expect(JSON.stringify([show.planned_values, show.resource_changes, show.prior_state])).not.toContain('second-secret-value');
    expect(JSON.stringify(show.resource_changes)).toContain('"client_secret_wo":null');
    await tf.ok(['apply', '-input=false', 'tfplan']);
    expect(await sealedOf(route.id)).toContain('second-secret-value');
    expect(fs.readFileSync(path.join(tf.dir, 'terraform.tfstate'), 'utf8')).not.toContain('second-secret-value');
  }, 180_000);

  it('refuses a secret given both ways, or a required one given neither way', async () => {
    const tf = await workspace(server);
    tf.write(config('x', 1).replace('client_secret_wo         = "x"', 'client_secret_wo = "x"\n    client_secret = "y"'));
    const both = await tf.run('plan', '-input=false');
    expect(both.code).toBe(1);
    expect(both.stderr).toMatch(/Both client_secret and client_secret_wo are set/);
    tf.write(config('x', 1).replace('client_secret_wo         = "x"\n', ''));
    const neither = await tf.run('plan', '-input=false');
    expect(neither.code).toBe(1);
    expect(neither.stderr).toMatch(/oidc\.client_secret: is required \(string\); or set client_secret_wo instead/);
  }, 120_000);
});
