// The compiled CLI: bin/edgeform.js runs dist/cli/ only when it is current (bin/launch.js),
// and bin/cli.ts loads only the module of the subcommand that runs (its COMMANDS table).
import fs from 'node:fs';
import path from 'node:path';
import { Command, Help } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain JavaScript, no declarations
import { compiledEntry } from '../../bin/launch.js';
import { COMMANDS, commandsFor, listingOnly, main } from '../../bin/cli.js';
import { COMMAND_LIST } from '../../bin/command-list.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterAll(removeTempDirs);

const entry = compiledEntry as (root: string, env?: Record<string, string | undefined>) => string | undefined;

/** A checkout-shaped folder with a build made at `builtAt` from bin/cli.ts and server/a.ts. */
function checkout(builtAt: number, opts: { sources?: boolean } = {}) {
  const root = tempDir('edgeform-launch-');
  fs.mkdirSync(path.join(root, 'dist/cli'), { recursive: true });
  fs.writeFileSync(path.join(root, 'dist/cli/inputs.json'), JSON.stringify({ builtAt, inputs: ['bin/cli.ts', 'server/a.ts'] }));
  if (opts.sources !== false) {
    for (const f of ['bin/cli.ts', 'server/a.ts']) {
      fs.mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
      fs.writeFileSync(path.join(root, f), '');
      const before = new Date(builtAt - 60_000);
      fs.utimesSync(path.join(root, f), before, before);
    }
  }
  return root;
}

describe('which build bin/edgeform.js runs', () => {
  it('the compiled one while no source it was built from changed since', () => {
    const root = checkout(Date.now());
    expect(entry(root, {})).toBe(path.join(root, 'dist/cli/cli.mjs'));
  });

  it('the sources once one of them is newer than the build: a stale build never runs', () => {
    const root = checkout(Date.now() - 10_000);
    fs.utimesSync(path.join(root, 'server/a.ts'), new Date(), new Date());
    expect(entry(root, {})).toBeUndefined();
  });

  it('the sources when a file the build came from is gone', () => {
    const root = checkout(Date.now());
    fs.rmSync(path.join(root, 'server/a.ts'));
    expect(entry(root, {})).toBeUndefined();
  });

  it('the sources with EDGEFORM_FROM_SOURCE=1, and when nothing was built', () => {
    expect(entry(checkout(Date.now()), { EDGEFORM_FROM_SOURCE: '1' })).toBeUndefined();
    const root = checkout(Date.now());
    fs.rmSync(path.join(root, 'dist'), { recursive: true });
    expect(entry(root, {})).toBeUndefined();
  });

  it('the compiled one in an installed package, which has no sources to compare with', () => {
    const root = checkout(Date.now(), { sources: false });
    expect(entry(root, {})).toBe(path.join(root, 'dist/cli/cli.mjs'));
  });

  it('the compiled one in this checkout, built by the tests\' global setup', () => {
    expect(entry(path.resolve(import.meta.dirname, '../..'), {})).toBe(path.resolve(import.meta.dirname, '../../dist/cli/cli.mjs'));
  });
});

describe('subcommands loaded on demand', () => {
  it('the table names every command its modules add, in the order --help lists them', async () => {
    const program = new Command('edgeform');
    const io = () => ({ out: () => true, err: () => true }) as never;
    for (const [names, add] of COMMANDS) {
      const before = program.commands.length;
      await add(program, () => {}, io);
      expect(program.commands.slice(before).map((c) => c.name())).toEqual(names);
    }
  });

  it('loads the named subcommand only, none for --version, and all for help or a misspelling', () => {
    const names = (argv: string[]) => commandsFor(['node', 'edgeform', ...argv]).flatMap(([n]) => n);
    expect(names(['validate', '-f', 'x'])).toEqual(['validate', 'plan', 'apply', 'destroy', 'export']);
    expect(names(['--version'])).toEqual([]);
    expect(names(['-V'])).toEqual([]);
    expect(names(['--help'])).toHaveLength(COMMANDS.flatMap(([n]) => n).length);
    expect(names(['valdate'])).toHaveLength(COMMANDS.flatMap(([n]) => n).length);
    expect(names(['help', 'serve'])).toHaveLength(COMMANDS.flatMap(([n]) => n).length);
  });

  it('the top-level help lists every subcommand from COMMAND_LIST, loading none, exactly as with every module loaded', async () => {
    const program = new Command('edgeform');
    const io = () => ({ out: () => true, err: () => true }) as never;
    for (const [, add] of COMMANDS) await add(program, () => {}, io);
    const help = new Help();
    const fromModules = program.commands.map((c) => [c.name(), help.subcommandTerm(c), c.description()]);
    // When this fails, a command's description, options or arguments changed: update bin/command-list.ts to match.
    expect(COMMAND_LIST).toEqual(fromModules);
    let listed = '';
    expect(await main(['node', 'edgeform', '--help'], { out: (t: string) => { listed += t; return true; }, err: () => true } as never)).toBe(0);
    const commandsPart = (t: string) => t.slice(t.indexOf('\nCommands:'));
    expect(commandsPart(listed)).toMatch(/^\nCommands:\n  serve \[options\]/);
    expect(commandsPart(listed)).toBe(commandsPart(program.helpInformation()));
    for (const argv of [['--help'], ['-h'], ['help'], []]) expect([argv, listingOnly(['node', 'edgeform', ...argv])]).toEqual([argv, true]);
    for (const argv of [['--version'], ['help', 'serve'], ['serve', '--help'], ['valdate'], ['--help', 'validate']]) expect([argv, listingOnly(['node', 'edgeform', ...argv])]).toEqual([argv, false]);
  });

  it('the compiled command answers --version, help and a misspelt command as the sources do', async () => {
    const version = await runCliProcess(['--version']);
    expect(version.stdout.trim()).toBe(JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../package.json'), 'utf8')).version);
    const help = await runCliProcess(['--help']);
    expect(help.stdout).toMatch(/serve \[options\][\s\S]*completion <shell>/);
    const typo = await runCliProcess(['valdate']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/Did you mean validate\?/);
  });
});
