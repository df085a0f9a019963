// Who a bearer token authenticates as, remembered briefly: authentication was three of a
// simple read's four statements. An entry is forgotten
//   - at once, on this instance, when a write that may change any caller commits (a key,
//     credential, bot or user created, changed or deleted: behaviours mark those kinds);
//   - within TTL_MS everywhere else, whoever wrote (another instance on the same PostgreSQL
//     database, an operator's `edgeform admin`): each entry lives TTL_MS from the moment its
//     lookup began, so a change committed after that moment shows within TTL_MS.
// Writes never trust it: each one checks and holds its caller in its own transaction (caller-hold.ts).
import { digestOf } from '../http/tokens.js';

/** Under the one second docs/api.md promises for other instances. */
export const TTL_MS = 500;
/** Distinct tokens remembered at once; the oldest goes first (presented tokens are the client's choice). */
const MAX_ENTRIES = 10_000;

export class CallerCache<T> {
  private readonly entries = new Map<string, { found: T; until: number }>();
  /** Bumped by every forget(): a lookup begun before one must not store what it read. */
  private generation = 0;

  constructor(private readonly ttlMs = TTL_MS, private readonly maxEntries = MAX_ENTRIES) {}

  /**
   * The cached answer for `token`, at once (no promise: most requests are answered from
   * here), else a promise of `lookup`'s (remembered when it found someone).
   */
  resolve(token: string, lookup: () => Promise<T | undefined>, now = Date.now()): T | Promise<T | undefined> {
    const digest = digestOf(token);
    const hit = this.entries.get(digest);
    if (hit && hit.until > now) return hit.found;
    if (hit) this.entries.delete(digest);
    return this.lookUp(digest, lookup, now);
  }

  private async lookUp(digest: string, lookup: () => Promise<T | undefined>, now: number): Promise<T | undefined> {
    const generation = this.generation;
    const found = await lookup();
    if (found !== undefined && generation === this.generation) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(digest, { found, until: now + this.ttlMs });
    }
    return found;
  }

  /** Forgets everything (a write that may change some caller committed). */
  forget() {
    this.generation++;
    this.entries.clear();
  }

  get size() {
    return this.entries.size;
  }
}
