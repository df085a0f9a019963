// The pipelines in examples/gitops/ run as written: for the GitHub Actions workflow and the
// GitLab CI file, every step whose script calls `edgeform` runs in bash, in the order the
// file lists it, against a real server (a merge request's jobs, then the default branch's,
// then a merge request again); the systemd unit's ExecStart runs and stops with its
// KillSignal. `edgeform` on the PATH is this repository's bin/edgeform.js.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { BIN } from '../helpers/cli-process.js';
import { startReconcile, type ReconcileService } from '../helpers/reconcile-service.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

const EXAMPLE = path.resolve(import.meta.dirname, '../../examples/gitops');
const PROCESSES = 180_000;
const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});
afterAll(removeTempDirs);

/** A checkout of the example (the manifests and pipeline files) and a PATH whose `edgeform` is this repository's. */
function workspace() {
  const dir = tempDir('edgeform-gitops-');
  fs.cpSync(EXAMPLE, dir, { recursive: true });
  const bin = tempDir('edgeform-bin-');
  fs.writeFileSync(path.join(bin, 'edgeform'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`, { mode: 0o755 });
  return { dir, path: `${bin}:${process.env.PATH}` };
}

/** Whether a script calls edgeform (installing it, `npm install --global edgeform`, is not run: the PATH has it). */
const callsEdgeform = (script: string) => script.split('\n').some((l) => /^\s*edgeform\s/.test(l));

async function bash(script: string, cwd: string, env: Record<string, string>): Promise<{ code: number; output: string }> {
  const child = spawn('bash', ['-e', '-c', script], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? 1)));
  return { code, output };
}

async function server() {
  const s = await startTestServer();
  servers.push(s);
  return s;
}

const policies = async (s: TestServer) => (await s.get('/ip_policies')).body.ip_policies;

describe('examples/gitops', () => {
  it('the GitHub Actions workflow: a pull request validates and plans (markdown, exit code kept), a merge applies, the next pull request plans no changes', async () => {
    const s = await server();
    const ws = workspace();
    const workflow = parse(fs.readFileSync(path.join(ws.dir, '.github/workflows/edgeform.yml'), 'utf8'));
    expect(Object.keys(workflow.jobs)).toEqual(['plan', 'apply']);
    const output = path.join(ws.dir, 'github-output');
    const env = { PATH: ws.path, EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, GITHUB_OUTPUT: output, NO_COLOR: '1' };
    const runJob = async (name: string) => {
      const steps = workflow.jobs[name].steps.filter((st: any) => typeof st.run === 'string' && callsEdgeform(st.run));
      expect(steps.length).toBeGreaterThan(0);
      for (const st of steps) {
        // Expressions are GitHub's to expand: a step's script must read values from the environment.
        expect(st.run).not.toContain('${{');
        const r = await bash(st.run, ws.dir, env);
        expect(r.code, `${name} / ${st.name}: ${r.output}`).toBe(0);
      }
      return steps.map((st: any) => st.name);
    };
    expect(await runJob('plan')).toEqual(['Validate', 'Plan']);
    expect(fs.readFileSync(output, 'utf8')).toContain('exitcode=2');
    const md = fs.readFileSync(path.join(ws.dir, 'plan.md'), 'utf8');
    expect(md).toContain('## edgeform plan for stack `gitops-example`');
    expect(md).toContain('**Plan: 3 to add, 0 to change, 0 to destroy.**');
    expect(await policies(s)).toHaveLength(0);

    expect(await runJob('apply')).toEqual(['Validate', 'Apply']);
    expect(await policies(s)).toHaveLength(1);
    expect((await s.get('/_edgeform/stack_locks/gitops-example')).status).toBe(404);

    fs.rmSync(output);
    await runJob('plan');
    expect(fs.readFileSync(output, 'utf8')).toContain('exitcode=0');
    expect(fs.readFileSync(path.join(ws.dir, 'plan.md'), 'utf8')).toContain('**No changes.**');

    // A broken manifest fails the plan job (exit 1 is an error, not "changes").
    fs.writeFileSync(path.join(ws.dir, 'manifests/broken.yaml'), 'kind: IPPolicy\nname: [x\n');
    const plan = workflow.jobs.plan.steps.find((st: any) => st.name === 'Plan');
    expect((await bash(plan.run, ws.dir, env)).code).toBe(1);
  }, PROCESSES);

  it('the GitLab CI file: each job\'s script, stage by stage, for a merge request and then the default branch', async () => {
    const s = await server();
    const ws = workspace();
    const ci = parse(fs.readFileSync(path.join(ws.dir, '.gitlab-ci.yml'), 'utf8'));
    const env = { PATH: ws.path, EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, NO_COLOR: '1' };
    const jobs = Object.entries(ci).filter(([, j]: [string, any]) => j && Array.isArray(j.script));
    const inStage = (stage: string) => jobs.filter(([, j]: [string, any]) => j.stage === stage);
    const runs = (j: any, source: 'merge_request_event' | 'push') =>
      j.rules.some((r: any) => (source === 'merge_request_event' ? r.if.includes('merge_request_event') : r.if.includes('$CI_DEFAULT_BRANCH')));
    const pipeline = async (source: 'merge_request_event' | 'push') => {
      const ran: string[] = [];
      for (const stage of ci.stages as string[]) {
        for (const [name, job] of inStage(stage) as Array<[string, any]>) {
          if (!runs(job, source)) continue;
          const script = (job.script as string[]).join('\n');
          expect(callsEdgeform(script)).toBe(true);
          const r = await bash(script, ws.dir, env);
          expect(r.code, `${name}: ${r.output}`).toBe(0);
          ran.push(name);
        }
      }
      return ran;
    };
    expect(await pipeline('merge_request_event')).toEqual(['validate', 'plan']);
    expect(fs.readFileSync(path.join(ws.dir, 'plan.md'), 'utf8')).toContain('**Plan: 3 to add');
    expect(await pipeline('push')).toEqual(['validate', 'apply']);
    expect(await policies(s)).toHaveLength(1);
    await pipeline('merge_request_event');
    expect(fs.readFileSync(path.join(ws.dir, 'plan.md'), 'utf8')).toContain('**No changes.**');
  }, PROCESSES);

  it('the systemd unit: its ExecStart keeps the stack converged and its KillSignal stops it with exit 0', async () => {
    const s = await server();
    const ws = workspace();
    const unit = fs.readFileSync(path.join(ws.dir, 'edgeform-reconcile.service'), 'utf8');
    const setting = (key: string) => /^(\w+)=(.*)$/m.exec(unit.split('\n').filter((l) => l.startsWith(`${key}=`))[0] ?? '')?.[2];
    expect(setting('KillSignal')).toBe('SIGTERM');
    expect(setting('Restart')).toBe('on-failure');
    const [exe, ...args] = setting('ExecStart')!.split(/\s+/);
    expect(path.basename(exe)).toBe('edgeform');
    // Where the unit's machine keeps the manifests, this checkout's; a free port for the metrics.
    const local = args.map((a) => (a === '/etc/edgeform/manifests' ? path.join(ws.dir, 'manifests') : /^127\.0\.0\.1:\d+$/.test(a) ? '127.0.0.1:0' : a));
    expect(local).toContain(path.join(ws.dir, 'manifests'));
    expect(local[0]).toBe('reconcile');
    const r: ReconcileService = startReconcile(s, local.slice(1));
    try {
      const first = await r.waitRun((l) => l.outcome === 'success' && l.changes_made > 0);
      expect(first).toMatchObject({ stack: 'gitops-example', applied: { add: 3 } });
      const health = await fetch(`${await r.metricsUrl()}/healthz`);
      expect(health.status).toBe(200);
      r.proc.kill(setting('KillSignal') as NodeJS.Signals);
      expect(await r.proc.exited, r.proc.output()).toBe(0);
    } finally {
      r.proc.kill();
    }
  }, PROCESSES);
});
