// Interruptions and restarts, end to end. Ctrl-C (SIGINT) mid-apply stops starting calls,
// lets the ones in flight finish, prints what was and was not done, releases the stack
// lock and exits 130; a second Ctrl-C exits 130 at once. A later apply finishes the job
// with no duplicates; so does Ctrl-C on `apply | tee`, whose closed pipe moves the summary to
// stderr. A server restarted mid-apply does not stop the run: creates whose
// answer was lost are looked up before they are sent again.
import { afterEach, describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { startCli, type CliProcess } from '../helpers/cli-process.js';
import { startProxy, type TestProxy } from '../helpers/proxy.js';
import { bigManifest, census, COMPLETE, DECLARED, NO_CHANGES, stackRunner } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const LOCK = '/_edgeform/stack_locks/default';
/** Tests that start edgeform processes (each loads TypeScript first) get room on a busy machine. */
const PROCESSES = 180_000;
const servers: TestServer[] = [];
const proxies: TestProxy[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
  for (const s of servers.splice(0)) await s.close();
});

/** An apply of bigManifest through a proxy that lets 20 creates through and holds the rest: mid-run, with calls in flight (one request per write: --batch-size 1). */
async function applyHeldMidway(lease?: number): Promise<{ s: TestServer; gate: TestProxy; run: CliProcess; dir: string }> {
  const s = await startTestServer(lease ? { stackLockLeaseSeconds: lease } : {});
  servers.push(s);
  const gate = await startProxy(s.url, { passFirst: 20 });
  proxies.push(gate);
  const dir = manifestDir({ 'big.yaml': bigManifest() });
  const run = startCli(['apply', '-f', dir, '--auto-approve', '--parallelism', '4', '--batch-size', '1'], { EDGEFORM_API_URL: gate.url, EDGEFORM_API_KEY: s.token });
  await until(() => gate.posts > 20, 60_000, () => 'never: creates held at the gate');
  return { s, gate, run, dir };
}

describe('Ctrl-C during apply', () => {
  it('the first SIGINT finishes the calls in flight, prints what was and was not done, releases the lock and exits 130; the next apply finishes', async () => {
    const { s, gate, run, dir } = await applyHeldMidway();
    run.child.kill('SIGINT');
    await run.waitFor(/Interrupt received\. Stopping: no new API calls are started/);
    const held = gate.posts;
    gate.open();
    expect(await run.exited, run.stdout + run.stderr).toBe(130);
    // Nothing was started after the interrupt: at most the creates in flight then (--parallelism 4) reached the server after it.
    expect(gate.posts - held).toBeLessThanOrEqual(4);
    const summary = /Apply interrupted: (\d+) changes? not done\. (\d+) added, 0 changed, 0 destroyed before that\. Run apply again to finish\./.exec(run.stdout);
    expect(summary, run.stdout).not.toBeNull();
    const [notDone, added] = [Number(summary![1]), Number(summary![2])];
    expect(notDone).toBeGreaterThan(0);
    expect(added).toBeGreaterThanOrEqual(20);
    expect(notDone + added).toBe(DECLARED);
    expect(run.stdout).toMatch(/Not done, because the run was interrupted: \S+/);
    expect((await s.get(LOCK)).status).toBe(404);
    expect(await census(s)).not.toEqual(COMPLETE);

    const r = stackRunner(s);
    const again = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toContain(`Apply complete! Resources: ${notDone} added, 0 changed, 0 destroyed.`);
    expect(await census(s)).toEqual(COMPLETE);
  }, PROCESSES);

  it('on `apply | tee apply.log`, where Ctrl-C stops tee too: the summary goes to stderr, the lock is released, exit 130', async () => {
    const { s, gate, run } = await applyHeldMidway();
    // tee is gone: what apply writes to standard output next finds the pipe closed.
    run.child.stdout!.destroy();
    run.child.kill('SIGINT');
    await run.waitFor(/Interrupt received\. Stopping: no new API calls are started/, 60_000, 'stderr');
    gate.open();
    expect(await run.exited, run.stderr).toBe(130);
    expect(run.stderr).toMatch(/Apply interrupted: \d+ changes? not done\. \d+ added, 0 changed, 0 destroyed before that\. Run apply again to finish\./);
    expect(run.stderr).not.toContain('Two interrupts received');
    expect((await s.get(LOCK)).status).toBe(404);
  }, PROCESSES);

  it('a second SIGINT exits 130 at once, saying state may be partial; its lock expires and the next apply finishes with no duplicates', async () => {
    const { s, gate, run, dir } = await applyHeldMidway(3);
    run.child.kill('SIGINT');
    await run.waitFor(/Interrupt received\. Stopping/);
    run.child.kill('SIGINT');
    // The creates in flight are still held at the gate: the process did not wait for them.
    expect(await run.exited).toBe(130);
    expect(run.stderr).toContain('Two interrupts received. Exiting immediately: the calls in flight may or may not have been made, so state may be partial');
    expect(run.stdout).not.toContain('Apply interrupted');
    gate.open();
    const r = stackRunner(s);
    const again = await r.run(['apply', '-f', dir, '--auto-approve', '--lock-timeout', '30s']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(await census(s)).toEqual(COMPLETE);
  }, PROCESSES);
});

describe('a server restarted mid-apply', () => {
  it('does not stop the run: it completes with no duplicates', async () => {
    let responses = 0;
    let restarted: Promise<void> | undefined;
    let after = 0;
    let s: TestServer;
    // A rolling restart: stop and start again on the same port after 40 of the apply's ~110 requests.
    s = await startTestServer({
      log: () => {
        if (restarted) after++;
        else if (++responses === 40) restarted = s.restart();
      },
    });
    servers.push(s);
    const dir = manifestDir({ 'big.yaml': bigManifest() });
    const r = stackRunner(s);
    const run = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(restarted).toBeDefined();
    await restarted;
    expect(after).toBeGreaterThan(0);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain(`Apply complete! Resources: ${DECLARED} added, 0 changed, 0 destroyed.`);
    expect(await census(s)).toEqual(COMPLETE);
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code).toBe(0);
  });
});
