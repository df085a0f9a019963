// When continuous reconcile runs: at once on start, then every interval; at once (after a
// short debounce) when a file under the manifests changes or something else asks (a server
// event); never two runs at once (a trigger during a run makes one more run after it);
// after failures, waits longer each time (the interval doubled per failure in a row, up to
// the larger of the interval and 5 minutes). `stop` lets the run in progress finish.
import fs from 'node:fs';
import path from 'node:path';

export type Trigger = 'start' | 'interval' | 'file' | 'event' | 'retry';

export interface LoopOptions {
  intervalMs: number;
  /** Files and folders whose changes start a run (folders watched recursively). */
  watch: string[];
  /** Changes within this time make one run (editors write a file in several steps). */
  debounceMs?: number;
  /** One run; resolves with whether it failed (to back off). */
  run: (trigger: Trigger) => Promise<{ failed: boolean }>;
  /** A watch that cannot be kept (the folder went away): the interval still runs. */
  onWatchError?: (message: string) => void;
  /**
   * Whether the server answers now (its /healthz). Asked after a failed run: while it does
   * not answer, it is asked again every `probeMs`, and the moment it does a run starts,
   * instead of after the failure backoff (which can be minutes after an outage). A run that
   * failed with the server answering (a manifest error) keeps the backoff.
   */
  probe?: () => Promise<boolean>;
  /** How often `probe` is asked while the server does not answer (default 1 s). */
  probeMs?: number;
}

export const MAX_BACKOFF_MS = 5 * 60_000;

/** The wait before the next run after `failures` failed runs in a row (0: the interval). */
export function nextDelay(intervalMs: number, failures: number): number {
  if (!failures) return intervalMs;
  return Math.min(intervalMs * 2 ** (failures - 1), Math.max(intervalMs, MAX_BACKOFF_MS));
}

/** Hidden files and folders (.git, an editor's .swp) are not manifests: their changes start no run. */
const hidden = (name: string | null) => !!name && name.split(/[\\/]/).some((part) => part.startsWith('.'));

export class ReconcileLoop {
  private timer?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private probing?: NodeJS.Timeout;
  /** Runs started so far: a server watch belongs to the run before it. */
  private started = 0;
  private running?: Promise<void>;
  private pending?: Trigger;
  private failures = 0;
  private stopping = false;
  private readonly watchers: fs.FSWatcher[] = [];
  private resolveDone!: () => void;
  /** Resolves once stopped and no run is in progress. */
  readonly done = new Promise<void>((r) => (this.resolveDone = r));

  constructor(private readonly opts: LoopOptions) {}

  start() {
    if (this.stopping) return;
    for (const p of this.opts.watch) this.watchPath(p);
    this.kick('start');
  }

  /** Asks for a run as soon as possible (after the debounce). */
  trigger(why: Trigger) {
    if (this.stopping) return;
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.kick(why), this.opts.debounceMs ?? 300);
  }

  /** No new run starts; resolves when the run in progress (if any) has finished. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    clearTimeout(this.debounce);
    clearTimeout(this.probing);
    for (const w of this.watchers) w.close();
    if (!this.running) this.resolveDone();
    return this.done;
  }

  get busy(): boolean {
    return !!this.running;
  }

  private watchPath(p: string) {
    try {
      const isDir = fs.statSync(p).isDirectory();
      // A file is watched through its folder: editors and git replace a file, which ends a watch on it.
      const dir = isDir ? p : path.dirname(p);
      const base = path.basename(p);
      const w = fs.watch(dir, { recursive: isDir }, (_event, name) => {
        const file = name?.toString() ?? null;
        if (hidden(file) || (!isDir && file !== base)) return;
        this.trigger('file');
      });
      w.on('error', (e) => this.opts.onWatchError?.(`watching ${p} stopped (${(e as Error).message}); changes are picked up on the interval`));
      this.watchers.push(w);
    } catch (e) {
      this.opts.onWatchError?.(`cannot watch ${p} (${(e as Error).message}); changes are picked up on the interval`);
    }
  }

  private kick(why: Trigger) {
    if (this.stopping) return;
    if (this.running) {
      this.pending = why;
      return;
    }
    clearTimeout(this.timer);
    clearTimeout(this.probing);
    this.probing = undefined;
    this.started++;
    this.running = (async () => {
      let failed = true;
      try {
        failed = (await this.opts.run(why)).failed;
      } finally {
        this.failures = failed ? this.failures + 1 : 0;
        this.running = undefined;
        this.after();
      }
    })();
  }

  private after() {
    if (this.stopping) {
      this.resolveDone();
      return;
    }
    const pending = this.pending;
    this.pending = undefined;
    if (pending) return this.kick(pending);
    this.timer = setTimeout(() => this.kick(this.failures ? 'retry' : 'interval'), nextDelay(this.opts.intervalMs, this.failures));
    if (this.failures && this.opts.probe) this.watchServer(0);
  }

  /** After a failed run: asks whether the server answers; while it does not, again every probeMs; once it does (after not answering), a run at once. */
  private watchServer(wait: number, wasDown = false) {
    const probe = this.opts.probe!;
    const run = this.started;
    this.probing = setTimeout(async () => {
      this.probing = undefined;
      let up = false;
      try {
        up = await probe();
      } catch {
        up = false;
      }
      // A run started meanwhile (a trigger, the backoff's timer), or stop: this watch is over.
      if (this.stopping || this.running || this.started !== run) return;
      if (!up) return this.watchServer(this.opts.probeMs ?? 1000, true);
      if (wasDown) this.kick('retry');
    }, wait);
  }
}
