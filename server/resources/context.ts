// What a request knows about its caller and the server, passed to every resource operation.
import type { Database, Tx } from '../store/db.js';
import type { SecretBox } from '../store/secret-box.js';
import type { Authenticated } from './accounts.js';
import type { CallerCache } from './caller-cache.js';

export interface Caller {
  keyId: string;
  /** The user or bot the key belongs to. */
  ownerId: string;
  admin: boolean;
}

export interface ServerContext {
  db: Database;
  box: SecretBox;
  /** Base of every uri, without a trailing slash. */
  publicUrl: string;
  /** Secret fingerprints per API key per hour (server/extensions/fingerprints.ts); 0: no limit. */
  fingerprintRateLimit?: number;
  /** Agent connections (server/gateway); absent until the server listens. */
  gateway?: { command(sessionId: string, action: 'stop' | 'restart' | 'update'): Promise<void>; readonly busState?: { state: string; reconnects: number } };
  /** Who bearer tokens authenticate as, briefly remembered (caller-cache.ts); absent: looked up every time. */
  callers?: CallerCache<Authenticated>;
  /**
   * Called after every committed write: applies it to the ingress's table (the write's answer
   * waits for that, so the change is live on the next request while ingress requests never
   * wait) and, unless the write says it queued no delivery, wakes the event delivery worker.
   */
  afterCommit?: (change?: Committed) => void | Promise<void>;
  /** How long a stack lock lives without renewal, in seconds (server/extensions/stack-locks.ts). */
  stackLockLeaseSeconds?: number;
}

/** What a committed write tells afterCommit. */
export interface Committed {
  /** Whether it queued event deliveries (false: the delivery worker has nothing new to look for). */
  deliveries: boolean;
  /**
   * The resources it inserted, updated or deleted (a delete also removes the children, which
   * are not named): the ingress applies these rows alone. Empty: none the routing table
   * holds; undefined: not known, so the ingress reloads its table whole.
   */
  ids?: string[];
}

export interface Ctx extends ServerContext {
  caller: Caller;
}

export type { Tx };
