// The manifests under examples/manifests validate offline, apply cleanly side by side on one
// server (each in its own stack), and plan empty right after: what a reader copies from there
// works as written.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runCli } from '../helpers/cli.js';

const ROOT = path.resolve(import.meta.dirname, '../../examples/manifests');
/** Secrets the examples read with ${env:...}. */
const SECRETS = { GH_SECRET: 'gh-example-secret-1', OAUTH_CLIENT_SECRET: 'oauth-example-secret-2', OIDC_CLIENT_SECRET: 'oidc-example-secret-3', STRIPE_WEBHOOK_SECRET: 'whsec_example_secret_4' };

const examples = fs.readdirSync(ROOT, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);

describe('examples/manifests', () => {
  it('has the quick start and the every-module example', () => {
    expect(examples).toEqual(expect.arrayContaining(['quickstart', 'every-module']));
  });

  // One server for all of them, each in its own stack as examples/manifests/README.md says:
  // a reader applies them side by side, and they must not fight over shared names.
  let s: TestServer;
  let env: Record<string, string>;
  const outputs: string[] = [];
  const run = async (args: string[]) => {
    const r = await runCli(args, env);
    outputs.push(r.stdout, r.stderr);
    return r;
  };
  beforeAll(async () => {
    s = await startTestServer();
    env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, ...SECRETS };
  });
  afterAll(async () => {
    await s?.close();
  });

  describe.each(examples)('%s', (example) => {
    const dir = path.join(ROOT, example);

    it('validates offline', async () => {
      const r = await run(['validate', '-f', dir]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^Success! \d+ documents? valid\.$/m);
    });

    it('names its own stack in an edgeform.yaml, which is not read as a manifest', () => {
      expect(fs.readFileSync(path.join(dir, 'edgeform.yaml'), 'utf8')).toMatch(new RegExp(`^stack: ${example}$`, 'm'));
    });

    it('applies in its own stack, then plans empty', async () => {
      const applied = await run(['apply', '-f', dir, '--auto-approve']);
      expect(applied.code, applied.stdout + applied.stderr).toBe(0);
      expect(applied.stdout).toMatch(/Apply complete! Resources: [1-9]\d* added, 0 changed, 0 destroyed\./);
      const plan = await run(['plan', '-f', dir, '--detailed-exitcode']);
      expect(plan.stdout).toContain('No changes. Your infrastructure matches the configuration.');
      expect(plan.code, plan.stdout).toBe(0);
    });
  });

  it('each still plans empty once all are applied: no example changed another\'s resources', async () => {
    for (const example of examples) {
      const plan = await run(['plan', '-f', path.join(ROOT, example), '--detailed-exitcode']);
      expect(plan.code, `${example}: ${plan.stdout}${plan.stderr}`).toBe(0);
    }
  });

  it('destroy deletes one example\'s stack, and the other still plans empty', async () => {
    const [first, ...rest] = examples;
    const destroyed = await run(['destroy', '-f', path.join(ROOT, first), '--auto-approve']);
    expect(destroyed.code, destroyed.stdout + destroyed.stderr).toBe(0);
    for (const example of rest) expect((await run(['plan', '-f', path.join(ROOT, example), '--detailed-exitcode'])).code).toBe(0);
  });

  it('never prints the secrets it was given', () => {
    for (const secret of Object.values(SECRETS)) expect(outputs.join('\n')).not.toContain(secret);
  });
});
