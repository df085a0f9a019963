// `edgeform force-unlock STACK LOCK_ID`: releases a stack's lock left by a run that is
// gone, as Terraform's force-unlock does for a state lock. It asks first unless --force.
import { Command } from 'commander';
import { lockInfoText, readLock, releaseLock, unsupported } from '../reconciler/apply/lock.js';
import { clientFor } from '../reconciler/session.js';
import { apiOptions, explain, targetOf, UsageError, UserError, type Io } from './reconcile.js';

export function forceUnlockCommand(setCode: (code: number) => void, io: () => Io): Command {
  return apiOptions(new Command('force-unlock'))
    .argument('<stack>', 'the locked stack')
    .argument('<lock-id>', 'the id of its lock (in the error of the run it blocks, "ID:")')
    .description('Release a stack\'s lock left by a run that is gone (a killed CI job). Only when no run holds it any more: two runs at once may duplicate resources.')
    .option('--force', 'do not ask for confirmation')
    .option('--json', 'print one JSON document (needs --force)')
    .option('--no-color', 'no colour, even on a terminal')
    .action(async (stack: string, lockId: string, opts: Record<string, any>) => {
      const out = io();
      try {
        setCode(await forceUnlock(out, stack, lockId, opts));
      } catch (e) {
        if (opts.json) out.out(`${JSON.stringify({ error: explain(e, opts.apiUrl) })}\n`);
        out.err(`${out.errStyle.red('Error:')} ${explain(e, opts.apiUrl)}\n`);
        setCode(e instanceof UsageError ? 2 : 1);
      }
    });
}

async function forceUnlock(out: Io, stack: string, lockId: string, opts: Record<string, any>): Promise<number> {
  if (opts.json && !opts.force) throw new UsageError('force-unlock --json needs --force: the confirmation prompt cannot share stdout with the JSON document');
  const t = targetOf({ ...opts, stack });
  const client = clientFor(t);
  try {
    let lock;
    try {
      lock = await readLock(client, stack);
    } catch (e) {
      if (unsupported(e)) throw new UserError(`the server at ${t.apiUrl} has no stack locks (an API server without edgeform's extension): there is nothing to unlock`);
      throw e;
    }
    if (!lock) throw new UserError(`stack "${stack}" is not locked (no lock was taken, it was released, or its lease expired): there is nothing to unlock`);
    if (lock.lock_id !== lockId) throw new UserError(`stack "${stack}" is locked with lock id ${lock.lock_id}, not ${lockId}; a newer run may hold it.\n\n${lockInfoText(lock)}`);
    if (!opts.force) {
      if (!out.ask) throw new UserError('force-unlock needs confirmation, and there is no terminal to ask on; pass --force');
      out.out(`${lockInfoText(lock)}\n\n${out.outStyle.bold('Do you really want to force-unlock?')}\n  edgeform will remove the lock on stack "${stack}", so that other runs can take it.\n  If the run above still runs, two runs may then change the stack at once.\n  Only 'yes' will be accepted to confirm.\n\n`);
      const answer = (await out.ask('  Enter a value: ')).trim();
      if (answer !== 'yes') {
        out.out('\nforce-unlock cancelled.\n');
        return 1;
      }
    }
    await releaseLock(client, stack, lockId);
    if (opts.json) out.out(`${JSON.stringify({ unlocked: true, lock })}\n`);
    else out.out(`\n${out.outStyle.green(out.outStyle.bold(`Stack "${stack}" has been successfully unlocked!`))}\n\nThe lock is released; edgeform commands can now take it again.\n`);
    return 0;
  } finally {
    await client.close();
  }
}
