// `edgeform reconcile`, end to end against a real server: drift undone by the next run on
// the interval, a manifest change applied at once, a server that goes away and comes back,
// SIGTERM mid-run (the run finishes, exit 0, the lock released), --dry-run that only reports,
// and /healthz and /metrics while it runs.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { startProxy, type TestProxy } from '../helpers/proxy.js';
import { toYaml } from '../helpers/reconciler.js';
import { startReconcile, type ReconcileService } from '../helpers/reconcile-service.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

/** Tests that start edgeform processes (each loads TypeScript first) get room on a busy machine. */
const PROCESSES = 180_000;
const servers: TestServer[] = [];
const proxies: TestProxy[] = [];
const services: ReconcileService[] = [];
afterEach(async () => {
  for (const r of services.splice(0)) {
    r.proc.kill();
    await r.proc.exited;
  }
  for (const p of proxies.splice(0)) await p.close();
  for (const s of servers.splice(0)) await s.close();
});
afterAll(removeTempDirs);

async function server(overrides: Parameters<typeof startTestServer>[0] = {}) {
  const s = await startTestServer(overrides);
  servers.push(s);
  return s;
}

function service(s: TestServer | { url: string; token: string }, args: string[]) {
  const r = startReconcile(s, args);
  services.push(r);
  return r;
}

const policy = (name: string, description: string) => toYaml([{ kind: 'IPPolicy', name, description }]);

async function policyNamed(s: TestServer, description: string) {
  return (await s.get('/ip_policies?limit=100')).body.ip_policies.filter((p: any) => p.description === description);
}

describe('edgeform reconcile', () => {
  it('without events, undoes a change made by hand on the next run of the interval, and says so in its log, /metrics and /healthz', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office v1') });
    const r = service(s, ['-f', dir, '--stack', 'web', '--interval', '1s', '--metrics-address', '127.0.0.1:0', '--no-events']);
    const first = await r.waitRun((l) => l.outcome === 'success' && l.changes_made === 1);
    expect(first).toMatchObject({ stack: 'web', trigger: 'start', applied: { add: 1, change: 0, destroy: 0 }, drift_found: 0, errors: [], managed: 1 });
    expect(first.api_calls).toBeGreaterThan(0);
    expect(typeof first.duration_ms).toBe('number');
    const [live] = await policyNamed(s, 'office v1');

    expect((await s.patch(`/ip_policies/${live.id}`, { description: 'changed by hand' })).status).toBe(200);
    const seen = r.runs().length;
    const repair = await r.waitRun((l) => l.drift_found > 0, seen);
    expect(repair).toMatchObject({ outcome: 'drift_repaired', trigger: 'interval', drift: ['IPPolicy/office'], applied: { add: 0, change: 1, destroy: 0 }, errors: [] });
    expect((await s.get(`/ip_policies/${live.id}`)).body.description).toBe('office v1');
    // Steady state afterwards: runs that change nothing.
    const quiet = await r.waitRun((l) => l.outcome === 'success' && l.changes_made === 0, r.runs().length);
    expect(quiet.drift_found).toBe(0);

    const base = await r.metricsUrl();
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/edgeform_reconcile_runs_total\{stack="web",outcome="drift_repaired"\} 1\n/);
    expect(metrics).toMatch(/edgeform_reconcile_managed_resources\{stack="web"\} 1\n/);
    expect(metrics).toMatch(/edgeform_reconcile_last_run_success\{stack="web"\} 1\n/);
    expect(metrics).toMatch(/edgeform_reconcile_last_run_timestamp_seconds\{stack="web"\} \d+/);
    expect(metrics).toMatch(/edgeform_reconcile_api_calls_total\{stack="web"\} [1-9]\d*\n/);
    const count = /edgeform_reconcile_run_duration_seconds_count\{stack="web"\} (\d+)/.exec(metrics);
    expect(Number(count?.[1])).toBeGreaterThanOrEqual(3);
    expect(metrics).toMatch(/edgeform_reconcile_drift_resources\{stack="web"\} \d/);
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok', stack: 'web', last_run: { outcome: expect.any(String) } });
  }, PROCESSES);

  it('sees a change by hand through the server\'s change events, long before the interval, and removes its subscription on exit', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office') });
    const r = service(s, ['-f', dir, '--stack', 'web', '--interval', '1h', '--metrics-address', '127.0.0.1:0']);
    await r.proc.waitFor('subscribed to the server\'s change events');
    await r.waitRun((l) => l.outcome === 'success');
    // The events of the run's own change start one more run, which changes nothing.
    expect(await r.waitRun((l) => l.trigger === 'event')).toMatchObject({ outcome: 'success', changes_made: 0 });
    expect((await s.get('/event_destinations')).body.event_destinations).toHaveLength(1);
    const [live] = await policyNamed(s, 'office');
    const seen = r.runs().length;
    await s.patch(`/ip_policies/${live.id}`, { description: 'by hand' });
    const repair = await r.waitRun((l) => l.outcome === 'drift_repaired', seen);
    expect(repair.trigger).toBe('event');
    expect((await s.get(`/ip_policies/${live.id}`)).body.description).toBe('office');
    // Unsigned posts to the receiver are refused and start nothing.
    const forged = await fetch(`${await r.metricsUrl()}/events`, { method: 'POST', body: JSON.stringify({ type: 'ip_policy_updated.v0', object: { id: live.id } }) });
    expect(forged.status).toBe(401);
    r.proc.child.kill('SIGTERM');
    expect(await r.proc.exited, r.proc.output()).toBe(0);
    expect((await s.get('/event_destinations')).body.event_destinations).toHaveLength(0);
    expect((await s.get('/event_subscriptions')).body.event_subscriptions).toHaveLength(0);
  }, PROCESSES);

  it('applies a manifest change at once, not on the interval', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office') });
    const r = service(s, ['-f', dir, '--stack', 'web', '--interval', '1h']);
    await r.waitRun((l) => l.outcome === 'success');
    fs.writeFileSync(path.join(dir, 'lab.yaml'), policy('lab', 'lab'));
    const run = await r.waitRun((l) => l.trigger === 'file' && l.changes_made > 0);
    expect(run).toMatchObject({ outcome: 'success', applied: { add: 1, change: 0, destroy: 0 }, managed: 2 });
    expect(await policyNamed(s, 'lab')).toHaveLength(1);
    // A manifest that does not parse is a failed run, logged; nothing is applied, and the loop goes on.
    fs.writeFileSync(path.join(dir, 'lab.yaml'), 'kind: IPPolicy\nname: [lab\n');
    const bad = await r.waitRun((l) => l.outcome === 'failure');
    expect(bad.errors.join('\n')).toContain('lab.yaml');
    expect(bad.api_calls).toBe(0);
    fs.writeFileSync(path.join(dir, 'lab.yaml'), policy('lab', 'lab two'));
    await r.waitRun((l) => l.outcome === 'success' && l.applied.change === 1, r.runs().indexOf(bad) + 1);
    expect(await policyNamed(s, 'lab two')).toHaveLength(1);
  }, PROCESSES);

  it('rides out a server that goes away: failed runs are logged, and once it is back a change by hand is repaired', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office') });
    const r = service(s, ['-f', dir, '--stack', 'web', '--interval', '1s']);
    await r.waitRun((l) => l.outcome === 'success');
    await s.stop();
    const failed = await r.waitRun((l) => l.outcome === 'failure', r.runs().length);
    expect(failed.errors.join('\n')).toContain('cannot reach the API');
    await s.start();
    const [live] = await policyNamed(s, 'office');
    await s.patch(`/ip_policies/${live.id}`, { description: 'by hand' });
    await r.waitRun((l) => l.outcome === 'drift_repaired', r.runs().indexOf(failed) + 1);
    expect((await s.get(`/ip_policies/${live.id}`)).body.description).toBe('office');
    expect(r.proc.child.exitCode).toBeNull();
  }, PROCESSES);

  it('started while the server is down, subscribes to its events once it is up', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office') });
    const url = s.url;
    await s.stop();
    const r = startReconcile({ url, token: s.token }, ['-f', dir, '--stack', 'web', '--interval', '1s', '--metrics-address', '127.0.0.1:0']);
    services.push(r);
    await r.waitRun((l) => l.outcome === 'failure');
    expect(r.proc.stdout).toContain('until a later run can subscribe');
    await s.start();
    await r.proc.waitFor('subscribed to the server\'s change events');
    await r.waitRun((l) => l.outcome === 'success');
    expect((await s.get('/event_destinations')).body.event_destinations).toHaveLength(1);
  }, PROCESSES);

  it('after an outage runs as soon as the server answers again, not after the failure backoff (an hour here)', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office') });
    const url = s.url;
    await s.stop();
    // With a one-hour interval, the backoff after the failed first run is an hour too.
    const r = startReconcile({ url, token: s.token }, ['-f', dir, '--stack', 'web', '--interval', '1h']);
    services.push(r);
    await r.waitRun((l) => l.outcome === 'failure');
    const runs = r.runs().length;
    await s.start();
    const next = await r.waitRun(() => true, runs, 30_000);
    expect(next).toMatchObject({ trigger: 'retry', outcome: 'success', changes_made: 1 });
  }, PROCESSES);

  it('subscribes again when the server comes back on an empty database, between runs; /metrics and /healthz show the subscription', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office') });
    const r = service(s, ['-f', dir, '--stack', 'web', '--interval', '1h', '--metrics-address', '127.0.0.1:0']);
    await r.proc.waitFor('subscribed to the server\'s change events');
    await r.waitRun((l) => l.outcome === 'success');
    const base = await r.metricsUrl();
    expect(await (await fetch(`${base}/metrics`)).text()).toMatch(/^edgeform_reconcile_events_subscribed\{stack="web",state="subscribed"\} 1$/m);
    // The server restarts on an empty database (the same first token): the subscription is gone with it.
    const file = s.server.db.where;
    await s.stop();
    for (const suffix of ['', '-wal', '-shm']) fs.rmSync(`${file}${suffix}`, { force: true });
    await s.start();
    expect((await s.get('/event_subscriptions')).body.event_subscriptions).toHaveLength(0);
    await r.proc.waitFor('subscribing again', 60_000, 'stdout');
    // The run that follows puts the stack back; then a change by hand arrives as an event.
    await until(async () => (await policyNamed(s, 'office')).length === 1, 30_000, () => r.proc.output());
    await until(async () => (await s.get('/event_subscriptions')).body.event_subscriptions.length === 1, 10_000);
    const [live] = await policyNamed(s, 'office');
    const seen = r.runs().length;
    await s.patch(`/ip_policies/${live.id}`, { description: 'by hand' });
    expect(await r.waitRun((l) => l.outcome === 'drift_repaired', seen, 30_000)).toMatchObject({ trigger: 'event' });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^edgeform_reconcile_events_subscribed\{stack="web",state="subscribed"\} 1$/m);
    expect(metrics).toMatch(/^edgeform_reconcile_events_subscriptions_total\{stack="web"\} 2$/m);
    expect(await (await fetch(`${base}/healthz`)).json()).toMatchObject({ events: 'subscribed' });
  }, PROCESSES);

  it('asks the server for the fingerprint of a secret once, not every run: the budget of 3 an hour lasts through many runs and a changed secret', async () => {
    const s = await server({ fingerprintRateLimit: 3 });
    const hook = (name: string, secret: string) => ({ kind: 'EventDestination', name, target: { http: { url: `https://hooks.example.com/${name}`, secret } } });
    const dir = manifestDir({ 'hooks.yaml': toYaml([hook('a', 'secret-a-1'), hook('b', 'secret-b-1')]) });
    const r = service(s, ['-f', dir, '--stack', 'web', '--interval', '1s', '--no-events']);
    await r.waitRun((l) => l.outcome === 'success' && l.changes_made === 2);
    await r.waitRun((l) => l.outcome === 'success' && l.changes_made === 0, 3);
    fs.writeFileSync(path.join(dir, 'hooks.yaml'), toYaml([hook('a', 'secret-a-2'), hook('b', 'secret-b-1')]));
    const changed = await r.waitRun((l) => l.applied.change === 1);
    expect(changed).toMatchObject({ outcome: 'success', errors: [] });
    await r.waitRun((l) => l.changes_made === 0, r.runs().indexOf(changed) + 2);
    expect(r.runs().filter((l) => l.outcome === 'failure')).toEqual([]);
  }, PROCESSES);

  it('on SIGTERM mid-run finishes the run, releases the stack lock and exits 0', async () => {
    const s = await server();
    const gate = await startProxy(s.url, { passFirst: 1 });
    proxies.push(gate);
    const docs = Array.from({ length: 6 }, (_, i) => ({ kind: 'IPPolicy', name: `p${i}`, description: `p${i}` }));
    const dir = manifestDir({ 'p.yaml': toYaml(docs) });
    // One request per create (--batch-size 1), so that the gate holds some of them.
    const r = service({ url: gate.url, token: s.token }, ['-f', dir, '--stack', 'web', '--interval', '1h', '--parallelism', '2', '--batch-size', '1']);
    await r.proc.waitFor('"reconcile started"');
    // Creates are held at the gate: the run is mid-apply.
    const deadline = Date.now() + 60_000;
    while (gate.posts < 2 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    expect(gate.posts).toBeGreaterThanOrEqual(2);
    r.proc.child.kill('SIGTERM');
    await r.proc.waitFor('finishing the run in progress');
    gate.open();
    expect(await r.proc.exited, r.proc.output()).toBe(0);
    const [run] = r.runs();
    expect(run).toMatchObject({ outcome: 'success', applied: { add: 6 }, errors: [] });
    expect(r.proc.stdout).toContain('"reconcile stopped"');
    expect((await s.get('/_edgeform/stack_locks/web')).status).toBe(404);
    expect((await s.get('/ip_policies?limit=100')).body.ip_policies).toHaveLength(6);
  }, PROCESSES);

  it('--dry-run --once only reports drift; --once exits 0 on success and 1 on failure', async () => {
    const s = await server();
    const dir = manifestDir({ 'office.yaml': policy('office', 'office') });
    const env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token };
    const once = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once'], env);
    expect(once.code, once.stdout + once.stderr).toBe(0);
    const [live] = await policyNamed(s, 'office');
    await s.patch(`/ip_policies/${live.id}`, { description: 'by hand' });
    const dry = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once', '--dry-run'], env);
    expect(dry.code, dry.stdout + dry.stderr).toBe(0);
    const line = JSON.parse(dry.stdout.trim().split('\n').pop()!);
    expect(line).toMatchObject({ outcome: 'drift_found', dry_run: true, drift_found: 1, drift: ['IPPolicy/office'], changes_made: 0, planned: { change: 1 } });
    expect((await s.get(`/ip_policies/${live.id}`)).body.description).toBe('by hand');
    const down = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once'], { ...env, EDGEFORM_API_URL: 'http://127.0.0.1:1' });
    expect(down.code).toBe(1);
    expect(JSON.parse(down.stdout.trim())).toMatchObject({ outcome: 'failure', level: 'error' });
    // Another run holds the stack's lock: the run is skipped, nothing is applied.
    const held = await s.put('/_edgeform/stack_locks/web', { lock_id: 'a0b1c2d3-0000-4000-8000-000000000001', host: 'ci', pid: 1, command: 'edgeform apply', who: 'ci' });
    expect(held.status, held.text).toBeLessThan(300);
    const locked = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--once'], env);
    expect(locked.code).toBe(1);
    expect(JSON.parse(locked.stdout.trim()).errors.join(' ')).toMatch(/stack "web" is locked by edgeform apply/);
    expect((await s.get(`/ip_policies/${live.id}`)).body.description).toBe('by hand');
    const usage = await runCliProcess(['reconcile', '-f', dir, '--stack', 'web', '--metrics-address', 'nowhere'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--metrics-address');
  }, PROCESSES);
});
