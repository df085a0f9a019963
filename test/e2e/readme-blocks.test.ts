// The shell blocks of README.md and docs/*.md marked `<!-- tested: ... -->` run as written, in
// order, each in a fresh folder: bash -e, `edgeform` on the PATH being this checkout's
// bin/edgeform.js. The one substitution, the same for every block: the ports the blocks name
// (8080 for the API, 8443 for the ingress listener, 3000 for the app) become free loopback
// ports, so the test runs beside anything else on the machine. A block must stop what it
// started (the test then stops the block's process group whatever happened).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN } from '../helpers/cli-process.js';
import { freePort } from '../helpers/ports.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterAll(removeTempDirs);

const ROOT = path.resolve(import.meta.dirname, '../..');
const PORTS = [8080, 8443, 3000];

/** Every marked block of a Markdown file: the line after the marker opens a ```sh fence. */
function testedBlocks(file: string): { name: string; script: string }[] {
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(/^<!-- tested: ([^\n]*?) -->\n```sh\n([\s\S]*?)^```$/gm)].map((m) => ({ name: `${path.relative(ROOT, file)}: ${m[1]}`, script: m[2] }));
}

const files = [path.join(ROOT, 'README.md'), ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => path.join(ROOT, 'docs', f))];
const blocks = files.flatMap(testedBlocks);

async function runBlock(script: string): Promise<{ code: number; output: string }> {
  const dir = tempDir('edgeform-readme-');
  const bin = tempDir('edgeform-readme-bin-');
  fs.writeFileSync(path.join(bin, 'edgeform'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`, { mode: 0o755 });
  let local = script;
  for (const port of PORTS) local = local.replace(new RegExp(`\\b${port}\\b`, 'g'), String(await freePort()));
  const child = spawn('bash', ['-e', '-c', local], { cwd: dir, detached: true, env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, NO_COLOR: '1', EDGEFORM_API_URL: '', EDGEFORM_API_KEY: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const timer = setTimeout(() => { try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* gone */ } }, 150_000);
  const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? 1)));
  clearTimeout(timer);
  try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* all stopped */ }
  return { code, output };
}

describe('marked shell blocks of README and docs', () => {
  it('there are some: the README\'s "Agents" and "Serving traffic"', () => {
    expect(blocks.map((b) => b.name.replace(/,.*/, ''))).toEqual(expect.arrayContaining(['README.md: agents', 'README.md: serving traffic']));
  });

  it.each(blocks.map((b) => [b.name, b.script]))('%s', async (_name, script) => {
    const r = await runBlock(script);
    expect(r.code, r.output).toBe(0);
    if (script.includes('hello from the app')) expect(r.output).toContain('hello from the app');
  }, 180_000);
});
