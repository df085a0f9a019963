// Command-line entry: one subcommand per job, each with --help.
import { Command, CommanderError } from 'commander';
import { createRequire } from 'node:module';
import { adminCommand } from './admin.js';
import { agentCommand } from '../agent/command.js';
import { serveCommand } from './serve.js';
import { processIo, reconcileCommands, type Io } from './reconcile.js';
import { forceUnlockCommand } from './force-unlock.js';
import { policyCommand } from './policy.js';
import { completionCommand } from './completion.js';
import { versionCommand } from './version.js';
import { continuousCommand } from './continuous.js';
import { backupCommands } from './backup.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

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
  program.addCommand(serveCommand(setCode));
  program.addCommand(agentCommand(setCode));
  const noColor = argv.includes('--no-color');
  for (const c of reconcileCommands(setCode, () => io ?? processIo(noColor))) program.addCommand(c);
  program.addCommand(continuousCommand(setCode, () => io ?? processIo(noColor)));
  program.addCommand(adminCommand(setCode, () => io ?? processIo(noColor)));
  for (const c of backupCommands(setCode, () => io ?? processIo(noColor))) program.addCommand(c);
  program.addCommand(forceUnlockCommand(setCode, () => io ?? processIo(noColor)));
  program.addCommand(policyCommand(setCode, () => io ?? processIo(noColor)));
  program.addCommand(versionCommand(setCode, () => io ?? processIo(noColor)));
  program.addCommand(completionCommand(setCode, () => io ?? processIo(noColor), () => program));
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
