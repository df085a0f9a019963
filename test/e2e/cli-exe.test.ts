// The whole CLI as one executable (scripts/build-cli-exe.mjs, `npm run build:cli-exe`), copied
// alone into an empty folder and run with a PATH that holds no node: --version, validate, and
// serve on SQLite (its native addon travels inside and is written to the cache folder on first
// use), which migrates an empty database and answers the API with the first key.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain JavaScript, no declarations
import { buildCliExe } from '../../scripts/build-cli-exe.mjs';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };

describe('the single executable', () => {
  let exe: string;
  let dir: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    dir = tempDir('edgeform-exe-');
    exe = await (buildCliExe as (out: string) => Promise<string>)(path.join(dir, 'edgeform'));
    // No node on the PATH, a cache folder of the test's own.
    env = { PATH: '/nonexistent', HOME: dir, EDGEFORM_CACHE_DIR: path.join(dir, 'cache'), NO_COLOR: '1' };
  }, 300_000);
  afterAll(removeTempDirs);

  it('answers --version and validates manifests with nothing beside it', () => {
    const v = spawnSync(exe, ['--version'], { env, cwd: dir, encoding: 'utf8' });
    expect(v.stdout.trim()).toBe(version);
    fs.mkdirSync(path.join(dir, 'm'));
    fs.writeFileSync(path.join(dir, 'm/a.yaml'), 'kind: IPPolicy\nname: office\nrules:\n  - {cidr: 203.0.113.0/24, action: allow}\n');
    const ok = spawnSync(exe, ['validate', '-f', 'm'], { env, cwd: dir, encoding: 'utf8' });
    expect(ok.status, ok.stderr).toBe(0);
    fs.writeFileSync(path.join(dir, 'm/b.yaml'), 'kind: IPPolicy\nname: office\n');
    const dup = spawnSync(exe, ['validate', '-f', 'm'], { env, cwd: dir, encoding: 'utf8' });
    expect(dup.status).toBe(1);
    expect(dup.stdout + dup.stderr).toContain('IPPolicy/office');
  });

  it('serves the API on a new SQLite database, migrations and native addon inside', async () => {
    const child = spawn(exe, ['serve', '--port', '0', '--data-dir', path.join(dir, 'data')], { env, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`serve did not listen within 60 s: ${out}`)), 60_000);
        const seen = (d: Buffer) => {
          out += d;
          const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
          if (m) { clearTimeout(timer); resolve(m[1]); }
        };
        child.stdout.on('data', seen);
        child.stderr.on('data', seen);
        child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`serve exited ${code}: ${out}`)); });
      });
      expect(out).toContain('applied migrations: ');
      const token = fs.readFileSync(path.join(dir, 'data/bootstrap-token'), 'utf8').trim();
      const res = await fetch(`${url}/ip_policies`, { headers: { authorization: `Bearer ${token}`, 'service-version': '2' } });
      expect(res.status).toBe(200);
      expect((await res.json()).ip_policies).toEqual([]);
      expect(fs.readdirSync(path.join(dir, 'cache')).some((f) => f.endsWith('.node'))).toBe(true);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
    }
  }, 120_000);
});
