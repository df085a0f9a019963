// `edgeform version` and `edgeform completion`: what a user reaches for first, through the real CLI;
// the bash script is run in a real bash, as a shell would when Tab is pressed.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp.js';

const pkg = JSON.parse(fs.readFileSync(path.resolve('package.json'), 'utf8')) as { version: string };

describe('edgeform version', () => {
  it('prints the version, the API version and the platform', async () => {
    const r = await runCli(['version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`edgeform v${pkg.version}`);
    expect(r.stdout).toContain('API version 2');
    expect(r.stdout).toContain(`Node.js v${process.versions.node}`);
  });
  it('--json is one document a pipeline can read', async () => {
    const r = await runCli(['version', '--json']);
    expect(r.code).toBe(0);
    expect(r.json()).toEqual({ version: pkg.version, api_version: '2', node: process.versions.node, platform: process.platform, arch: process.arch });
  });
});

describe('edgeform completion', () => {
  const complete = (script: string, words: string[]) => {
    const file = path.join(tempDir(), 'edgeform.bash');
    fs.writeFileSync(file, script);
    const cmd = `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _edgeform; printf '%s\\n' "\${COMPREPLY[@]}"`;
    return execFileSync('bash', ['--norc', '-c', cmd], { encoding: 'utf8' }).split('\n').filter(Boolean);
  };

  it('bash completes commands, subcommands and flags from the command tree', async () => {
    const r = await runCli(['completion', 'bash']);
    expect(r.code).toBe(0);
    expect(complete(r.stdout, ['edgeform', 'pl'])).toEqual(['plan']);
    expect(complete(r.stdout, ['edgeform', 'policy', 't'])).toEqual(['test']);
    expect(complete(r.stdout, ['edgeform', 'plan', '-f', 'dir', '--det'])).toEqual(['--detailed-exitcode']);
    expect(complete(r.stdout, ['edgeform', 'serve', '--data-'])).toEqual(['--data-dir']);
    expect(complete(r.stdout, ['edgeform', ''])).toEqual(expect.arrayContaining(['serve', 'agent', 'apply', 'version', 'completion']));
  });

  it('zsh and fish scripts name every command and its flags', async () => {
    const zsh = await runCli(['completion', 'zsh']);
    const fish = await runCli(['completion', 'fish']);
    expect(zsh.code).toBe(0);
    expect(fish.code).toBe(0);
    expect(zsh.stdout).toMatch(/^#compdef edgeform/);
    expect(zsh.stdout).toContain("'apply') cmdpath='apply' ;;");
    expect(zsh.stdout).toMatch(/'--auto-approve:[^']*'/);
    expect(fish.stdout).toContain("complete -c edgeform -n '__fish_use_subcommand' -a 'plan'");
    expect(fish.stdout).toContain("complete -c edgeform -n '__fish_seen_subcommand_from apply' -l 'auto-approve'");
  });

  it('an unknown shell is a usage error that lists the shells', async () => {
    const r = await runCli(['completion', 'powershell']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown shell "powershell"; one of bash, zsh, fish');
  });
});
