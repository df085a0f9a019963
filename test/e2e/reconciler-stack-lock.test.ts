// The stack lock, end to end: real `edgeform` processes against a real server. Two applies
// of one stack at once: one writes, the other fails at once naming the holder, or waits
// (--lock-timeout) and then has nothing to do; nothing is made twice. A killed holder's
// lock is taken over by the next run on its host; force-unlock releases a lock; --lock=false
// runs without one; a server without the extension is warned about once.
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { startCli } from '../helpers/cli-process.js';
import { startProxy, type TestProxy } from '../helpers/proxy.js';
import { bigManifest, census, COMPLETE, DECLARED, stackRunner, toYaml } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const LOCK = '/_edgeform/stack_locks/default';
/** Tests that start edgeform processes (each loads TypeScript first) get room on a busy machine. */
const PROCESSES = 180_000;
/** A lock as a run elsewhere (now gone) would have left it. */
const ELSEWHERE = { lock_id: 'c0ffee00-0000-4000-8000-000000000001', host: 'ci-runner-7', pid: 4121, command: 'edgeform apply -f other/ --auto-approve', who: 'ci@ci-runner-7' };

const servers: TestServer[] = [];
const proxies: TestProxy[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
  for (const s of servers.splice(0)) await s.close();
});

async function server(lease?: number) {
  const s = await startTestServer(lease ? { stackLockLeaseSeconds: lease } : {});
  servers.push(s);
  return s;
}

async function proxyTo(s: TestServer, opts: Parameters<typeof startProxy>[1] = {}) {
  const p = await startProxy(s.url, opts);
  proxies.push(p);
  return p;
}

/** Polls until the stack's lock is held (bounded). */
async function lockHeld(s: TestServer) {
  for (let i = 0; i < 300; i++) {
    const r = await s.get(LOCK);
    if (r.status === 200) return r.body;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the lock was never taken');
}

const env = (url: string, s: TestServer) => ({ EDGEFORM_API_URL: url, EDGEFORM_API_KEY: s.token });

describe('two applies of one stack at once', () => {
  it('the second fails at once naming the holder, a third waits with --lock-timeout and then has nothing to do; nothing is duplicated', async () => {
    const s = await server();
    const gate = await proxyTo(s);
    const dir = manifestDir({ 'big.yaml': bigManifest() });
    // The first run is held at its first create, so it is mid-apply while the others start.
    const first = startCli(['apply', '-f', dir, '--auto-approve'], env(gate.url, s));
    const holder = await lockHeld(s);
    expect(holder).toMatchObject({ pid: first.child.pid, command: `edgeform apply -f ${dir} --auto-approve` });
    await first.waitFor(/Creating\.\.\./);

    const second = startCli(['apply', '-f', dir, '--auto-approve'], env(s.url, s));
    expect(await second.exited).toBe(1);
    expect(second.stderr).toContain('Error: Error acquiring the stack lock: stack "default" is locked by another run.');
    for (const line of [`ID:        ${holder.lock_id}`, `Process:   ${first.child.pid}`, `Command:   edgeform apply -f ${dir} --auto-approve`, `Created:   ${holder.created_at}`, `Host:      ${holder.host}`]) {
      expect(second.stderr).toContain(line);
    }
    expect(second.stderr).toContain(`edgeform force-unlock default ${holder.lock_id}`);
    expect(second.stdout).not.toContain('Creating...');

    const third = startCli(['apply', '-f', dir, '--auto-approve', '--lock-timeout', '2m'], env(s.url, s));
    await third.waitFor(/Acquiring the stack lock: stack "default" is held by edgeform apply/);
    gate.open();
    expect(await first.exited, first.stdout + first.stderr).toBe(0);
    expect(first.stdout).toContain(`Apply complete! Resources: ${DECLARED} added, 0 changed, 0 destroyed.`);
    expect(await third.exited, third.stdout + third.stderr).toBe(0);
    expect(third.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 0 destroyed.');
    expect(await census(s)).toEqual(COMPLETE);
    // Both released their lock.
    expect((await s.get(LOCK)).status).toBe(404);
  }, PROCESSES);

  it('a killed holder (SIGKILL) leaves its lock; the next run on this host takes it over (the process is gone) and applies', async () => {
    // A lease far longer than the test: only the takeover can free the lock in time.
    const s = await server(600);
    const gate = await proxyTo(s);
    const dir = manifestDir({ 'big.yaml': bigManifest() });
    const killed = startCli(['apply', '-f', dir, '--auto-approve'], env(gate.url, s));
    const holder = await lockHeld(s);
    await killed.waitFor(/Creating\.\.\./);
    killed.child.kill('SIGKILL');
    expect(await killed.exited).toBe(137);
    expect(holder.lease_seconds).toBe(600);
    // Left behind: nobody released it.
    expect((await s.get(LOCK)).body.lock_id).toBe(holder.lock_id);
    const next = startCli(['apply', '-f', dir, '--auto-approve', '--lock-timeout', '0s'], env(s.url, s));
    expect(await next.exited, next.stdout + next.stderr).toBe(0);
    expect(next.stderr).toContain(`taking over the lock on stack "default" from edgeform apply -f ${dir} --auto-approve (pid ${killed.child.pid}`);
    expect(await census(s)).toEqual(COMPLETE);
  }, PROCESSES);
});

describe('a lock left by a process of this host that no longer exists', () => {
  it('is taken over at once, saying so, rather than waited out for its lease', async () => {
    const os = await import('node:os');
    const { spawnSync } = await import('node:child_process');
    const s = await server(600);
    // A pid that was this host's and is gone: a process that ran and exited.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    const left = { ...ELSEWHERE, host: os.hostname(), pid: gone, who: `ci@${os.hostname()}` };
    expect((await s.put(LOCK, left)).status).toBe(200);
    const dir = manifestDir({ 'p.yaml': toYaml([{ kind: 'IPPolicy', name: 'office' }]) });
    const run = startCli(['apply', '-f', dir, '--auto-approve'], env(s.url, s));
    expect(await run.exited, run.stdout + run.stderr).toBe(0);
    expect(run.stderr).toContain(`Warning: taking over the lock on stack "default" from edgeform apply -f other/ --auto-approve (pid ${gone} on ${os.hostname()}`);
    expect(run.stderr).toContain('that process no longer exists on this host');
    expect((await s.get(LOCK)).status).toBe(404);
  }, PROCESSES);

  it('a live holder on this host, or one on another host, is not taken over', async () => {
    const os = await import('node:os');
    const { holderIsDead } = await import('../../reconciler/apply/lock.js');
    const info = { ...ELSEWHERE, stack: 'default', created_at: '', expires_at: '', lease_seconds: 60 };
    expect(holderIsDead({ ...info, host: os.hostname(), pid: process.ppid })).toBe(false);
    expect(holderIsDead({ ...info, host: 'another-host', pid: 999_999_999 })).toBe(false);
    expect(holderIsDead({ ...info, host: os.hostname(), pid: 999_999_999 })).toBe(true);
  });
});

describe('a run whose lock another run took', () => {
  it('warns and starts no more calls (after a force-unlock and a new holder)', async () => {
    const s = await server(3);
    const gate = await proxyTo(s, { passFirst: 10 });
    const dir = manifestDir({ 'big.yaml': bigManifest() });
    // One request per create (--batch-size 1), so that the gate holds some of them.
    const first = startCli(['apply', '-f', dir, '--auto-approve', '--parallelism', '2', '--batch-size', '1'], env(gate.url, s));
    const holder = await lockHeld(s);
    await first.waitFor(/Creation complete/);
    const r = stackRunner(s);
    expect((await r.run(['force-unlock', 'default', holder.lock_id, '--force'])).code).toBe(0);
    expect((await s.put(LOCK, ELSEWHERE)).status).toBe(200);
    await first.waitFor(/Warning: the lock on stack "default" was lost: lock \S+ was released by someone else and is now held by edgeform apply -f other\/ --auto-approve \(pid 4121 on ci-runner-7/);
    const posts = gate.posts;
    gate.open();
    expect(await first.exited).toBe(1);
    expect(gate.posts).toBe(posts);
    expect(first.stdout).toMatch(/Apply interrupted: \d+ changes not done\./);
    // The new holder's lock is left alone.
    expect((await s.get(LOCK)).body.lock_id).toBe(ELSEWHERE.lock_id);
  }, PROCESSES);
});

describe('force-unlock, --lock=false, --lock-timeout', () => {
  const doc = toYaml([{ kind: 'IPPolicy', name: 'office', description: 'office' }]);

  it('force-unlock releases a lock left behind, after confirmation; a wrong lock id or no lock is refused', async () => {
    const s = await server();
    const r = stackRunner(s);
    const dir = manifestDir({ 'p.yaml': doc });
    expect((await s.put(LOCK, ELSEWHERE)).status).toBe(200);
    const blocked = await r.run(['apply', '-f', dir, '--auto-approve', '--json']);
    expect(blocked.code).toBe(1);
    expect(blocked.json().lock).toMatchObject({ lock_id: ELSEWHERE.lock_id, host: 'ci-runner-7', pid: 4121 });
    expect(blocked.json().error).toContain('Error acquiring the stack lock');

    const wrong = await r.run(['force-unlock', 'default', 'not-the-id', '--force']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`stack "default" is locked with lock id ${ELSEWHERE.lock_id}, not not-the-id`);
    const noTerminal = await r.run(['force-unlock', 'default', ELSEWHERE.lock_id]);
    expect(noTerminal.code).toBe(1);
    expect(noTerminal.stderr).toContain('pass --force');
    const declined = await r.run(['force-unlock', 'default', ELSEWHERE.lock_id], {}, 'no');
    expect(declined.code).toBe(1);
    expect(declined.stdout).toContain('Do you really want to force-unlock?');
    expect(declined.stdout).toContain('force-unlock cancelled.');
    expect((await s.get(LOCK)).status).toBe(200);
    const confirmed = await r.run(['force-unlock', 'default', ELSEWHERE.lock_id], {}, 'yes');
    expect(confirmed.code, confirmed.stderr).toBe(0);
    expect(confirmed.stdout).toContain('Stack "default" has been successfully unlocked!');
    expect((await s.get(LOCK)).status).toBe(404);

    const none = await r.run(['force-unlock', 'default', ELSEWHERE.lock_id, '--force']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('stack "default" is not locked');
    expect((await s.put(LOCK, ELSEWHERE)).status).toBe(200);
    const json = await r.run(['force-unlock', 'default', ELSEWHERE.lock_id, '--force', '--json']);
    expect(json.code).toBe(0);
    expect(json.json()).toMatchObject({ unlocked: true, lock: { lock_id: ELSEWHERE.lock_id } });
    expect((await r.run(['force-unlock', 'default', ELSEWHERE.lock_id, '--json'])).code).toBe(2);
    expect((await r.run(['force-unlock', '--help'])).stdout).toContain('Usage: edgeform force-unlock [options] <stack> <lock-id>');
    expect((await r.run(['apply', '-f', dir, '--auto-approve'])).code).toBe(0);
  });

  it('--lock=false applies beside a held lock, with a warning; --lock-timeout gives up naming the holder; a bad duration is a usage error', async () => {
    const s = await server();
    const r = stackRunner(s);
    const dir = manifestDir({ 'p.yaml': doc });
    expect((await s.put(LOCK, ELSEWHERE)).status).toBe(200);
    const waited = await r.run(['apply', '-f', dir, '--auto-approve', '--lock-timeout', '1s']);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain('Acquiring the stack lock: stack "default" is held by edgeform apply -f other/ --auto-approve (pid 4121 on ci-runner-7');
    expect(waited.stderr).toContain('is locked by another run, still after waiting 1s (--lock-timeout).');
    expect((await s.get('/ip_policies')).body.ip_policies).toHaveLength(0);
    const unlocked = await r.run(['apply', '-f', dir, '--auto-approve', '--lock=false']);
    expect(unlocked.code, unlocked.stderr).toBe(0);
    expect(unlocked.stderr).toContain('Warning: --lock=false: running without the stack lock');
    expect((await s.get('/ip_policies')).body.ip_policies).toHaveLength(1);
    // The other run's lock is untouched.
    expect((await s.get(LOCK)).body.lock_id).toBe(ELSEWHERE.lock_id);
    expect((await r.run(['apply', '-f', dir, '--lock-timeout', 'soon'])).code).toBe(2);
    // destroy and apply PLANFILE take the lock too.
    const file = `${dir}/saved.plan`;
    fs.writeFileSync(`${dir}/p.yaml`, toYaml([{ kind: 'IPPolicy', name: 'office', description: 'changed' }]));
    const planned = await r.run(['plan', '-f', dir, '--out', file]);
    expect(planned.code, planned.stderr).toBe(0);
    // destroy names its stack (edgeform refuses destroy on a stack nobody named).
    for (const args of [['apply', file], ['destroy', '-f', dir, '--stack', 'default', '--auto-approve']]) {
      const blocked = await r.run(args);
      expect(blocked.code, args.join(' ')).toBe(1);
      expect(blocked.stderr).toContain(`Error: Error acquiring the stack lock: stack "default" is locked by another run.`);
      expect(blocked.stderr).toContain(`ID:        ${ELSEWHERE.lock_id}`);
    }
    expect((await s.get('/ip_policies')).body.ip_policies[0].description).toBe('office');
    // plan takes no lock: it reads beside a running apply (and sees the change still to make).
    expect((await r.run(['plan', '-f', dir, '--detailed-exitcode'])).code).toBe(2);
  });

  it('against a server without the extension, apply and destroy warn once and go on', async () => {
    const s = await server();
    const bare = await proxyTo(s, { withoutExtensions: true, open: true });
    const r = stackRunner(s, { EDGEFORM_API_URL: bare.url });
    const dir = manifestDir({ 'p.yaml': doc });
    const applied = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr.match(/has no stack locks/g)).toHaveLength(1);
    expect(applied.stderr).toContain(`Warning: the server at ${bare.url} has no stack locks`);
    const destroyed = await r.run(['destroy', '-f', dir, '--stack', 'default', '--auto-approve']);
    expect(destroyed.code, destroyed.stderr).toBe(0);
    expect(destroyed.stderr.match(/has no stack locks/g)).toHaveLength(1);
    expect((await s.get('/ip_policies')).body.ip_policies).toHaveLength(0);
  });
});
