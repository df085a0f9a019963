// --notify URL on reconcile and apply: each run's outcome (success, failure, drift_repaired,
// drift_found) POSTed as JSON to a local receiver, signed with HMAC-SHA256 of the raw body
// when a secret is given (Edgeform-Signature: sha256=<hex>), which the test verifies.
import { timingSafeEqual } from 'node:crypto';
import { signatureOf } from '../../server/events/delivery.js';
import { afterAll, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { receiver, type Received } from '../helpers/events.js';
import { toYaml } from '../helpers/reconciler.js';
import { startTestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';
import { eventually } from '../helpers/wait.js';

afterAll(removeTempDirs);
const SECRET = 'notify-signing-secret-0123456789';

function verified(r: Received): boolean {
  const header = String(r.headers['edgeform-signature'] ?? '');
  // The form the server's own event deliveries are signed in.
  const want = signatureOf(SECRET, r.body);
  return header.length === want.length && timingSafeEqual(Buffer.from(header), Buffer.from(want));
}

it('reconcile and apply notify each outcome, signed; a body changed in transit does not verify; a dead webhook is a warning only', async () => {
  const s = await startTestServer();
  const hook = await receiver();
  try {
    const dir = manifestDir({ 'a.yaml': toYaml([{ kind: 'IPPolicy', name: 'office', description: 'office' }]) });
    const env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, EDGEFORM_NOTIFY_SECRET: SECRET };
    const apply = await runCliProcess(['apply', '-f', dir, '--stack', 'web', '--auto-approve', '--notify', hook.url], env);
    expect(apply.code, apply.stderr).toBe(0);
    await eventually(async () => expect(hook.received).toHaveLength(1));
    expect(verified(hook.received[0])).toBe(true);
    expect(hook.received[0].json).toMatchObject({ source: 'edgeform', command: 'apply', stack: 'web', outcome: 'success', applied: { add: 1 }, errors: [] });

    const office = (await s.get('/ip_policies')).body.ip_policies[0];
    await s.patch(`/ip_policies/${office.id}`, { description: 'by hand' });
    const dry = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once', '--dry-run', '--notify', hook.url], env);
    expect(dry.code, dry.stdout + dry.stderr).toBe(0);
    const fixed = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once', '--notify', hook.url], env);
    expect(fixed.code, fixed.stdout + fixed.stderr).toBe(0);
    const failed = await runCliProcess(['apply', '-f', dir, '--stack', 'web', '--auto-approve', '--notify', hook.url], { ...env, EDGEFORM_API_KEY: 'not-a-key-0123456789abcdefghijklmnopqrstuvwx' });
    expect(failed.code).toBe(1);
    await eventually(async () => expect(hook.received).toHaveLength(4));
    const [, found, repaired, failure] = hook.received;
    expect(found.json).toMatchObject({ command: 'reconcile', outcome: 'drift_found', dry_run: true, drift_found: 1, drift: ['IPPolicy/office'], applied: { change: 0 } });
    expect(repaired.json).toMatchObject({ command: 'reconcile', outcome: 'drift_repaired', drift: ['IPPolicy/office'], applied: { change: 1 } });
    expect(failure.json.outcome).toBe('failure');
    expect(failure.json.errors.join(' ')).toContain('refused the key');
    for (const r of hook.received) expect(verified(r)).toBe(true);
    // Changed in transit, the body no longer matches its signature.
    expect(verified({ ...hook.received[1], body: hook.received[1].body.replace('drift_found', 'success') })).toBe(false);

    // --notify-on filters; no secret, no signature header.
    const quiet = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once', '--notify', hook.url, '--notify-on', 'failure,drift_found'], { ...env, EDGEFORM_NOTIFY_SECRET: undefined });
    expect(quiet.code).toBe(0);
    const loud = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once', '--notify', hook.url], { ...env, EDGEFORM_NOTIFY_SECRET: undefined });
    expect(loud.code).toBe(0);
    await eventually(async () => expect(hook.received).toHaveLength(5));
    expect(hook.received[4].json.outcome).toBe('success');
    expect(hook.received[4].headers['edgeform-signature']).toBeUndefined();

    // Nobody listening: the run still succeeds, with a warning that names no secret.
    const dead = await runCliProcess(['apply', '-f', dir, '--stack', 'web', '--auto-approve', '--notify', 'http://127.0.0.1:1/hook?token=abc'], env);
    expect(dead.code, dead.stderr).toBe(0);
    expect(dead.stderr).toContain('the notification to http://127.0.0.1:1/hook was not delivered');
    expect(dead.stderr).not.toContain('token=abc');
  } finally {
    await hook.close();
    await s.close();
  }
}, 180_000);
