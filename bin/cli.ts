// Command-line entry: one subcommand per job, each with --help.
import { Command, CommanderError, Help } from 'commander';
import { COMMAND_LIST } from './command-list.js';
import { packageVersion as version } from '../server/package-root.js';
import type { Io } from './reconcile.js';
import { activeRun, stdoutState } from './interrupts.js';

type Add = (program: Command, setCode: (c: number) => void, io: () => Io) => Promise<void>;

/**
 * Each subcommand's module, loaded only when that subcommand runs: `edgeform validate` need not
 * load the server, nor `edgeform --version` anything (the difference between 2 s and 0.1 s at
 * start). In the order `--help` lists them. Every name a module adds is listed against it, and a
 * test checks this table against what the modules add.
 */
export const COMMANDS: [names: string[], add: Add][] = [
  [['serve'], async (p, setCode) => { p.addCommand((await import('./serve.js')).serveCommand(setCode)); }],
  [['agent'], async (p, setCode) => { p.addCommand((await import('../agent/command.js')).agentCommand(setCode)); }],
  [['validate', 'plan', 'apply', 'destroy', 'export'], async (p, setCode, io) => { for (const c of (await import('./reconcile.js')).reconcileCommands(setCode, io)) p.addCommand(c); }],
  [['reconcile'], async (p, setCode, io) => { p.addCommand((await import('./continuous.js')).continuousCommand(setCode, io)); }],
  [['admin'], async (p, setCode, io) => { p.addCommand((await import('./admin.js')).adminCommand(setCode, io)); }],
  [['backup', 'restore'], async (p, setCode, io) => { for (const c of (await import('./backup.js')).backupCommands(setCode, io)) p.addCommand(c); }],
  [['force-unlock'], async (p, setCode, io) => { p.addCommand((await import('./force-unlock.js')).forceUnlockCommand(setCode, io)); }],
  [['policy'], async (p, setCode, io) => { p.addCommand((await import('./policy.js')).policyCommand(setCode, io)); }],
  [['version'], async (p, setCode, io) => { p.addCommand((await import('./version.js')).versionCommand(setCode, io)); }],
  [['completion'], async (p, setCode, io) => { p.addCommand((await import('./completion.js')).completionCommand(setCode, io, () => p)); }],
];

/**
 * The subcommands to load for argv: the named one, none for a bare `--version`, and all of them
 * otherwise (`--help`, `help`, a mistyped name that commander suggests a spelling for, completion).
 */
export function commandsFor(argv: string[]): typeof COMMANDS {
  const args = argv.slice(2);
  const first = args.find((a) => !a.startsWith('-'));
  if (first === undefined && args.some((a) => a === '-V' || a === '--version') && !args.some((a) => a === '-h' || a === '--help')) return [];
  const named = COMMANDS.find(([names]) => first !== undefined && names.includes(first));
  return named && first !== 'completion' ? [named] : COMMANDS;
}

/**
 * Whether argv asks for the top-level help alone (`--help`, `-h`, `help`, or nothing), which
 * lists the subcommands from COMMAND_LIST without loading any of them.
 */
export function listingOnly(argv: string[]): boolean {
  const args = argv.slice(2);
  const words = args.filter((a) => !a.startsWith('-'));
  if (args.some((a) => a.startsWith('-') && a !== '-h' && a !== '--help')) return false;
  return words.length === 0 || (words.length === 1 && words[0] === 'help');
}

/** The program with each subcommand as a stub that has its listed term and description, for the top-level help. */
function listSubcommands(program: Command) {
  const terms = new Map(COMMAND_LIST.map(([name, term]) => [name, term]));
  for (const [name, , description] of COMMAND_LIST) program.addCommand(new Command(name).description(description));
  const help = new Help();
  program.configureHelp({ subcommandTerm: (c) => terms.get(c.name()) ?? help.subcommandTerm(c) });
}

const processIoOf = async (noColor: boolean) => (await import('./reconcile.js')).processIo(noColor);

/**
 * A reader that stops early (`edgeform export | head`) closes the pipe under standard output.
 * Node reports that as an EPIPE error, which would end the process with a stack trace; stop as
 * a program does on SIGPIPE instead, quietly. A command that runs until signalled (serve, agent,
 * reconcile --continuous) has a SIGTERM handler: it gets SIGTERM, so it drains as it would on one.
 */
function stopQuietlyOnClosedPipe(): void {
  let closed = false;
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    if (closed) return;
    closed = true;
    // An apply or destroy under way: its output goes to stderr from here, and it stops as on
    // Ctrl-C (what was done, the lock released, exit 130) rather than vanishing holding the lock.
    stdoutState.closed = true;
    if (activeRun) return activeRun.outputClosed();
    if (process.listenerCount('SIGTERM') > 0) process.kill(process.pid, 'SIGTERM');
    else process.exit(process.exitCode ?? 0);
  });
}

/** Exit codes: 0 success, 1 error, 2 usage error (or, with --detailed-exitcode, changes present). */
export async function main(argv: string[], io?: Io): Promise<number> {
  const program = new Command('edgeform')
    .description('Self-hostable Tunnel, Edge and Traffic-Control Management API, and the tools to manage it as code.')
    .version(version)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  if (!io) stopQuietlyOnClosedPipe();
  let code = 0;
  const setCode = (c: number) => { code = c; };
  // The process's Io is reconcile.js's; a command that takes one loads that module anyway.
  const noColor = argv.includes('--no-color');
  const listing = listingOnly(argv);
  const loaded = listing ? [] : commandsFor(argv);
  const shared = io ?? (loaded.some(([names]) => names[0] !== 'serve' && names[0] !== 'agent') ? await processIoOf(noColor) : undefined);
  const ioOf = () => shared as Io;
  if (listing) listSubcommands(program);
  for (const [, add] of loaded) await add(program, setCode, ioOf);
  // Subcommands do not inherit these: a usage error must throw (exit 2), not exit the process.
  // Commander's help and usage errors go where the command's own output goes (captured in tests).
  const output = { writeOut: (t: string) => (io ? io.out(t) : process.stdout.write(t)), writeErr: (t: string) => (io ? io.err(t) : process.stderr.write(t)) };
  program.configureOutput(output);
  const every = (c: Command): Command[] => [c, ...c.commands.flatMap(every)];
  for (const c of program.commands.flatMap(every)) c.exitOverride().showHelpAfterError('(run with --help for usage)').configureOutput(output);
  try {
    await program.parseAsync(argv);
    return code;
  } catch (e) {
    // With --detailed-exitcode, 2 means "changes present", so a usage error is 1 there.
    if (e instanceof CommanderError) {
      if (e.exitCode === 0) return 0;
      // A --json reader parses stdout whatever went wrong, a mistyped option included.
      if (argv.includes('--json')) output.writeOut(`${JSON.stringify({ error: e.message.replace(/^error: /, '') })}\n`);
      return argv.includes('--detailed-exitcode') ? 1 : 2;
    }
    process.stderr.write(`Error: ${(e as Error).message}\n`);
    return 1;
  }
}
