// The CLI installed without the source tree, as examples/gitops installs it: `npm pack` makes
// edgeform-VERSION.tgz (compiled JavaScript, production dependencies only), the GitHub Actions
// workflow's install step installs it globally (into a temporary prefix here: npm's own
// npm_config_prefix), and the installed `edgeform` answers --version and validates the
// example's manifests from a folder that is not this checkout. Install scripts are skipped
// (npm_config_ignore_scripts: better-sqlite3's native build takes minutes and neither command
// opens a database) and packages come from npm's cache when it has them.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterAll(removeTempDirs);

const ROOT = path.resolve(import.meta.dirname, '../..');
const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
const run = promisify(execFile);

function bash(script: string, cwd: string, env: Record<string, string>): Promise<{ code: number; output: string }> {
  const child = spawn('bash', ['-e', '-c', script], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  return new Promise((r) => child.on('close', (c) => r({ code: c ?? 1, output })));
}

const walk = (dir: string): string[] => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? (e.name === 'node_modules' ? [] : walk(path.join(dir, e.name))) : [path.join(dir, e.name)]));

describe('the package tarball', () => {
  it('npm pack, the example pipeline\'s install step, then edgeform --version and validate outside the checkout', async () => {
    const out = tempDir('edgeform-pack-');
    await run('npm', ['pack', '--pack-destination', out], { cwd: ROOT, maxBuffer: 1 << 24 });
    const tgz = path.join(out, `edgeform-${version}.tgz`);
    expect(fs.existsSync(tgz)).toBe(true);

    const ws = tempDir('edgeform-pack-ws-');
    fs.cpSync(path.join(ROOT, 'examples/gitops'), ws, { recursive: true });
    const workflow = parse(fs.readFileSync(path.join(ws, '.github/workflows/edgeform.yml'), 'utf8'));
    const install = workflow.jobs.plan.steps.find((st: { name?: string }) => st.name === 'Install edgeform').run as string;
    // GitLab's before_script is the same command.
    expect(parse(fs.readFileSync(path.join(ws, '.gitlab-ci.yml'), 'utf8')).before_script).toEqual([install.trim()]);
    const prefix = tempDir('edgeform-prefix-');
    const npmEnv = { npm_config_prefix: prefix, npm_config_ignore_scripts: 'true', npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false' };
    // Without the variable the step stops, naming it.
    const unset = await bash(install, ws, { ...npmEnv, EDGEFORM_PACKAGE: '' });
    expect(unset.code).not.toBe(0);
    expect(unset.output).toContain('EDGEFORM_PACKAGE');
    const installed = await bash(install, ws, { ...npmEnv, EDGEFORM_PACKAGE: tgz });
    expect(installed.code, installed.output).toBe(0);

    const pkg = path.join(prefix, 'lib/node_modules/edgeform');
    // Compiled JavaScript and the migrations; no TypeScript, no dev dependencies.
    const files = walk(pkg).map((f) => path.relative(pkg, f));
    expect(files).toContain('dist/cli/cli.mjs');
    expect(files.some((f) => f.startsWith('prisma/migrations/sqlite/'))).toBe(true);
    expect(files.filter((f) => f.endsWith('.ts'))).toEqual([]);
    for (const dev of ['tsx', 'vitest', 'typescript', 'esbuild', 'prisma']) expect(fs.existsSync(path.join(pkg, 'node_modules', dev)), dev).toBe(false);

    const env = { PATH: `${path.join(prefix, 'bin')}:${process.env.PATH}`, NO_COLOR: '1' };
    const v = await bash('edgeform --version', ws, env);
    expect(v.output.trim()).toBe(version);
    const validate = await bash(workflow.jobs.plan.steps.find((st: { name?: string }) => st.name === 'Validate').run, ws, env);
    expect(validate.code, validate.output).toBe(0);
    expect(validate.output).toMatch(/documents? valid/);
  }, 600_000);
});
