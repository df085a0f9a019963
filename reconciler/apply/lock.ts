// The stack lock, client side: a lease on the server (docs/api.md, "Stack locks") taken
// before a run's first write, renewed while the run lives, released at its end. A run
// that dies without releasing it leaves a lease that expires by itself.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { ApiClientError, NO_SUCH_PATH, type ApiClient } from '../../provider/client/index.js';

export const STACK_LOCKS_PATH = '/_edgeform/stack_locks';
/** The server's code for "held by another run". */
export const LOCK_HELD = 'ERR_SERVICE_328';
/** The server's code for "nobody holds it". */
export const NOT_LOCKED = 'ERR_SERVICE_304';

export interface LockInfo {
  stack: string;
  lock_id: string;
  host: string;
  pid: number;
  command: string;
  who: string;
  created_at: string;
  expires_at: string;
  lease_seconds: number;
}

/** Another run holds the lock (after waiting `waitedMs`, if a timeout was given). */
export class LockHeld extends Error {
  constructor(
    readonly holder: LockInfo,
    readonly waitedMs: number,
  ) {
    super(`stack "${holder.stack}" is locked by another run (lock ${holder.lock_id})`);
  }
}

export const lockPath = (stack: string) => `${STACK_LOCKS_PATH}/${encodeURIComponent(stack)}`;

/** The server has no stack locks (an API server without edgeform's extension). */
export const unsupported = (e: unknown) => e instanceof ApiClientError && e.status === 404 && e.code === NO_SUCH_PATH;

export const heldBy = (e: unknown): LockInfo | undefined =>
  e instanceof ApiClientError && e.status === 409 && e.code === LOCK_HELD ? (e.details.lock as LockInfo | undefined) : undefined;

/** The lock's row as the server has it, or undefined when nobody holds it. */
export async function readLock(client: ApiClient, stack: string): Promise<LockInfo | undefined> {
  try {
    return await client.call<LockInfo>('GET', lockPath(stack));
  } catch (e) {
    if (e instanceof ApiClientError && e.status === 404 && e.code === NOT_LOCKED) return undefined;
    throw e;
  }
}

export async function releaseLock(client: ApiClient, stack: string, lockId: string): Promise<void> {
  await client.call('DELETE', `${lockPath(stack)}?lock_id=${encodeURIComponent(lockId)}`);
}

export interface AcquireOptions {
  stack: string;
  /** The command line to show other runs (no secrets). */
  command: string;
  /** How long to wait for another run's lock (ms); 0 fails at once. */
  timeoutMs: number;
  /** Said once, when the lock is held and the run waits for it. */
  onWait?: (holder: LockInfo) => void;
  /** Said when a renewal finds the lock taken away (force-unlocked, or expired and taken). */
  onLost?: (why: string) => void;
  /** Said when a renewal fails for another reason (the server is unreachable for a while). */
  onRenewFailed?: (why: string) => void;
  /** Said when the lock is taken over from a run of this host whose process no longer exists. */
  onTakeOver?: (holder: LockInfo) => void;
}

/**
 * Whether the holder is a run on this host whose process is gone (killed, or stopped by a
 * closed pipe before it could release): its lock can be taken at once instead of after its
 * lease. Signal 0 checks existence; EPERM means a process of another user exists.
 */
export function holderIsDead(h: LockInfo, host = os.hostname()): boolean {
  if (h.host !== host || !Number.isInteger(h.pid) || h.pid <= 0 || h.pid === process.pid) return false;
  try {
    process.kill(h.pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

export interface Lease {
  info: LockInfo;
  /** Stops renewing and releases; never throws (returns what went wrong, if anything). */
  release(): Promise<string | undefined>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Takes the stack's lock, waiting up to `timeoutMs` for another run's; throws LockHeld
 * naming the holder when it stays held. Returns undefined when the server has no stack
 * locks (the caller warns and goes on).
 */
export async function acquireLock(client: ApiClient, opts: AcquireOptions): Promise<Lease | undefined> {
  const body = { lock_id: randomUUID(), host: os.hostname(), pid: process.pid, command: opts.command, who: whoami() };
  const started = Date.now();
  let said = false;
  let vanished = 0;
  const tookOver = new Set<string>();
  let info: LockInfo;
  for (;;) {
    try {
      info = await client.call<LockInfo>('PUT', lockPath(opts.stack), body);
      break;
    } catch (e) {
      if (unsupported(e)) return undefined;
      const holder = heldBy(e);
      if (!(e instanceof ApiClientError && e.status === 409 && e.code === LOCK_HELD)) throw e;
      const waited = Date.now() - started;
      // Changed hands between the server's two statements: no holder to name, try again (a few times).
      if (!holder && ++vanished < 10) continue;
      if (!holder) throw e;
      if (holderIsDead(holder) && !tookOver.has(holder.lock_id)) {
        tookOver.add(holder.lock_id);
        opts.onTakeOver?.(holder);
        try {
          await releaseLock(client, opts.stack, holder.lock_id);
        } catch (err) {
          // Taken or released meanwhile: the next PUT says which.
          if (!(err instanceof ApiClientError && (err.code === NOT_LOCKED || err.status === 409))) throw err;
        }
        continue;
      }
      if (waited >= opts.timeoutMs) throw new LockHeld(holder, waited);
      if (!said) opts.onWait?.(holder);
      said = true;
      await sleep(Math.min(1000, opts.timeoutMs - waited, Math.max(100, Date.parse(holder.expires_at) - Date.now())));
    }
  }
  // Renewed three times a lease, so one late or failed renewal does not lose it.
  let lost = false;
  let renewing: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    renewing = client.call<LockInfo>('PUT', lockPath(opts.stack), body).then(
      (renewed) => { info = renewed; },
      (e) => {
        const holder = heldBy(e);
        if (holder || (e instanceof ApiClientError && e.code === LOCK_HELD)) {
          if (!lost) opts.onLost?.(holder ? `lock ${body.lock_id} was released by someone else and is now held by ${describeHolder(holder)}` : `lock ${body.lock_id} was lost`);
          lost = true;
        } else opts.onRenewFailed?.((e as Error).message);
      },
    );
  }, Math.max(200, (info.lease_seconds * 1000) / 3));
  timer.unref();
  return {
    get info() { return info; },
    async release() {
      clearInterval(timer);
      await renewing;
      if (lost) return undefined;
      try {
        await releaseLock(client, opts.stack, body.lock_id);
        return undefined;
      } catch (e) {
        // Expired and nobody took it: nothing to release.
        if (e instanceof ApiClientError && e.code === NOT_LOCKED) return undefined;
        return `could not release the lock on stack "${opts.stack}" (${(e as Error).message}); it expires by itself at ${info.expires_at}, or run: edgeform force-unlock ${opts.stack} ${body.lock_id}`;
      }
    },
  };
}

function whoami(): string {
  try {
    return `${os.userInfo().username}@${os.hostname()}`;
  } catch {
    return os.hostname();
  }
}

export const describeHolder = (h: LockInfo) => `${h.command} (pid ${h.pid} on ${h.host}, since ${h.created_at})`;

/** Terraform's "Lock Info:" block. */
export function lockInfoText(h: LockInfo): string {
  return [
    'Lock Info:',
    `  ID:        ${h.lock_id}`,
    `  Stack:     ${h.stack}`,
    `  Command:   ${h.command}`,
    `  Who:       ${h.who}`,
    `  Host:      ${h.host}`,
    `  Process:   ${h.pid}`,
    `  Created:   ${h.created_at}`,
    `  Expires:   ${h.expires_at} (renewed every ${Math.round(h.lease_seconds / 3)} s while the run lives)`,
  ].join('\n');
}
