// Ctrl-C during apply and destroy. The first SIGINT stops the run from starting more API
// calls; the calls in flight finish, the run prints what was done and what was not,
// releases the stack lock and exits 130. Before any call was made (planning, asking),
// it releases the lock and exits 130 at once. A second SIGINT exits 130 at once.
import type { Io } from './reconcile.js';

/** The exit code of a run stopped by SIGINT (128 + 2), as shells and Terraform use. */
export const INTERRUPTED = 130;

/**
 * Standard output closed under a run: Ctrl-C on `edgeform apply | tee apply.log` stops tee as
 * well, and what apply prints next would go nowhere. The process's Io then writes to standard
 * error (still the terminal), so the summary is seen, and the run ends as on Ctrl-C.
 */
export const stdoutState = { closed: false };

/** The run in progress (apply, destroy), which a closed standard output stops as an interrupt does. */
export let activeRun: Interrupts | undefined;

export class Interrupts {
  private readonly controller = new AbortController();
  private count = 0;
  /**
   * Where the run is: before any change (an interrupt exits at once), making changes (it
   * stops them), or done with them (it lets the run release the lock and print its summary).
   */
  phase: 'planning' | 'executing' | 'finishing' = 'planning';
  /** Run before exiting on an interrupt outside execution (the lock's release). */
  beforeExit?: () => Promise<unknown>;
  private signalled = false;
  private readonly listener = () => void this.onSigint();

  constructor(private readonly io: Io) {
    process.on('SIGINT', this.listener);
    activeRun = this;
  }

  /** A SIGINT to ignore: the one that came with a closed pipe already acted on (Ctrl-C on `apply | tee`). */
  private sigintExpected = false;

  /**
   * Standard output was closed (its reader stopped): stop as on a first interrupt, unless one
   * came already. Ctrl-C on a pipeline sends SIGINT here too, maybe after the pipe closed: that
   * one is the same interrupt, not a second (which would exit at once, the summary unprinted).
   */
  outputClosed() {
    if (this.count > 0) return;
    this.sigintExpected = true;
    void this.onSigint();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  private async onSigint() {
    if (this.count === 1 && this.sigintExpected && !this.signalled) {
      this.signalled = true;
      return;
    }
    this.count++;
    const say = (t: string) => this.io.err(`${this.io.errStyle.yellow(t)}\n`);
    if (this.count > 1) {
      say('Two interrupts received. Exiting immediately: the calls in flight may or may not have been made, so state may be partial; run plan to see what is left.');
      process.exit(INTERRUPTED);
    }
    if (this.phase === 'finishing') {
      say('Interrupt received. The changes are over; releasing the stack lock. Press Ctrl-C again to exit immediately.');
      return;
    }
    if (this.phase === 'executing') {
      say('Interrupt received. Stopping: no new API calls are started; the ones in flight finish. Press Ctrl-C again to exit immediately (state may be partial).');
      this.controller.abort();
      return;
    }
    say('Interrupt received before any change was made. Exiting.');
    // Bounded: a server that does not answer must not keep the user waiting; the lease expires anyway.
    await Promise.race([this.beforeExit?.(), new Promise((r) => setTimeout(r, 3000).unref())]);
    process.exit(INTERRUPTED);
  }

  /** Whether the user interrupted the run (not only `stop`). */
  get interrupted(): boolean {
    return this.count > 0;
  }

  /** Stops the run's operations as an interrupt would, for another reason (the lock was lost). */
  stop() {
    this.controller.abort();
  }

  dispose() {
    process.off('SIGINT', this.listener);
    if (activeRun === this) activeRun = undefined;
  }
}
