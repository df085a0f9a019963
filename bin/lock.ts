// The stack lock on the command line: `--lock` and `--lock-timeout` of apply and destroy,
// and the run that holds the lock (and handles Ctrl-C) from before planning to its end.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { acquireLock, describeHolder, LockHeld, lockInfoText, type Lease, type LockInfo } from '../reconciler/apply/lock.js';
import { clientFor, type Target } from '../reconciler/session.js';
import { Interrupts } from './interrupts.js';
import type { Io } from './reconcile.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A duration as Terraform writes one (`30s`, `5m`, `1m30s`, `500ms`; a bare number is seconds), in ms. */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t) * 1000;
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(t)) throw new InvalidArgumentError('It must be a duration such as 0s, 30s, 5m or 1m30s.');
  let ms = 0;
  for (const m of t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) ms += Number(m[1]) * UNITS[m[2]];
  return Math.round(ms);
}

function parseBool(v: string): boolean {
  if (/^(true|1|yes)$/i.test(v)) return true;
  if (/^(false|0|no)$/i.test(v)) return false;
  throw new InvalidArgumentError('It must be true or false.');
}

export function lockOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--lock <bool>', 'take the stack lock on the server for the run (--lock=false: run without it, not recommended)').default(true).argParser(parseBool))
    .addOption(new Option('--lock-timeout <duration>', 'how long to wait for another run\'s lock on the stack (0s: fail at once)').default(0, '0s').argParser(parseDuration));
}

/** The command line other runs are shown, without the API key. */
export function commandLine(cmd: Command): string {
  const raw = (cmd.parent as (Command & { rawArgs?: string[] }) | null)?.rawArgs?.slice(2) ?? [cmd.name()];
  const shown: string[] = [];
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === '--api-key') {
      shown.push(raw[i], '***');
      i++;
    } else shown.push(raw[i].startsWith('--api-key=') ? '--api-key=***' : raw[i]);
  }
  return ['edgeform', ...shown].join(' ');
}

/** The stack is locked by another run: Terraform's "Error acquiring the state lock", for a stack. */
export class LockError extends Error {
  constructor(
    readonly lock: LockInfo,
    timeoutMs: number,
  ) {
    const waited = timeoutMs > 0 ? `, still after waiting ${Math.round(timeoutMs / 100) / 10}s (--lock-timeout)` : '';
    super(
      `Error acquiring the stack lock: stack "${lock.stack}" is locked by another run${waited}.\n\n${lockInfoText(lock)}\n\n` +
        'edgeform takes a lock on a stack so that two runs cannot change it at once. Wait for that run to finish, or let this one wait ' +
        `for it with --lock-timeout (such as --lock-timeout 5m). If that run is gone, its lock expires by itself at ${lock.expires_at}; ` +
        `to release it now: edgeform force-unlock ${lock.stack} ${lock.lock_id}. --lock=false runs without the lock (not recommended).`,
    );
  }
}

/** A run of apply or destroy: its stack lock and its Ctrl-C handling, from before planning to `end`. */
export interface Run {
  interrupts: Interrupts;
  /** Releases the lock (warning if it cannot) and stops handling Ctrl-C. */
  end(): Promise<void>;
}

/** Takes the stack's lock (unless --lock=false) and starts handling Ctrl-C; throws LockError while another run holds it. */
export async function startRun(io: Io, t: Target, opts: Record<string, any>, command: string): Promise<Run> {
  const interrupts = new Interrupts(io);
  const warn = (text: string) => io.err(`${io.errStyle.yellow('Warning:')} ${text}\n`);
  // Its own connection: renewals must not queue behind the run's calls.
  const lockClient = clientFor({ ...t, parallelism: 1 });
  let lease: Lease | undefined;
  interrupts.beforeExit = async () => lease?.release();
  const end = async () => {
    const problem = await lease?.release();
    if (problem) warn(problem);
    await lockClient.close();
    interrupts.dispose();
  };
  if (opts.lock === false) {
    warn(`--lock=false: running without the stack lock; another run on stack "${t.stack}" at the same time may duplicate or undo this one's changes`);
    return { interrupts, end };
  }
  try {
    lease = await acquireLock(lockClient, {
      stack: t.stack,
      command,
      timeoutMs: opts.lockTimeout ?? 0,
      onWait: (h) => io.err(`Acquiring the stack lock: stack "${t.stack}" is held by ${describeHolder(h)}; waiting up to ${opts.lockTimeout / 1000}s...\n`),
      onLost: (why) => {
        warn(`the lock on stack "${t.stack}" was lost: ${why}; stopping, as another run may now change the stack`);
        interrupts.stop();
      },
      onRenewFailed: (why) => warn(`could not renew the lock on stack "${t.stack}" (${why}); trying again`),
      onTakeOver: (h) => warn(`taking over the lock on stack "${t.stack}" from ${describeHolder(h)}: that process no longer exists on this host`),
    });
  } catch (e) {
    await end();
    if (e instanceof LockHeld) throw new LockError(e.holder, opts.lockTimeout ?? 0);
    throw e;
  }
  if (!lease) warn(`the server at ${t.apiUrl} has no stack locks (an API server without edgeform's extension); going on without a lock, so two runs on stack "${t.stack}" at once are not prevented`);
  return { interrupts, end };
}
