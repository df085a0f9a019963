// Who a bearer token authenticates as, remembered briefly: authentication was three of a
// simple read's four statements. An entry is forgotten
//   - at once, on this instance, when a write that may change any caller commits (a key,
//     credential, bot or user created, changed or deleted: behaviours mark those kinds);
//   - within TTL_MS everywhere else, whoever wrote (another instance on the same PostgreSQL
//     database, an operator's `edgeform admin`): each entry lives TTL_MS from the moment its
//     lookup began, so a change committed after that moment shows within TTL_MS.
// Requests that miss while a lookup of the same token is under way wait for that lookup
// rather than starting their own: when an entry expired under load, each of the requests in
// flight used to look the caller up at once, and those lookups together held every other
// request back (bench/README.md, "GET one on SQLite: the tail"). A lookup joined this way
// began before the request arrived, as a cached entry's did; forget() starts afresh.
// Writes never trust it: each one checks and holds its caller in its own transaction (caller-hold.ts).
import { digestOf } from '../http/tokens.js';

/** Under the one second docs/api.md promises for other instances. */
export const TTL_MS = 500;
/** Distinct tokens remembered at once; the oldest goes first (presented tokens are the client's choice). */
const MAX_ENTRIES = 10_000;

/** Finds who the token with this digest authenticates as; undefined for nobody. */
export type CallerLookup<T> = (digest: string) => Promise<T | undefined>;

export class CallerCache<T> {
  private readonly entries = new Map<string, { found: T; until: number }>();
  /** Lookups under way, by digest, with the time each began. */
  private readonly pending = new Map<string, { lookup: Promise<T | undefined>; began: number }>();
  /** Bumped by every forget(): a lookup begun before one must not store what it read. */
  private generation = 0;

  constructor(private readonly lookup: CallerLookup<T>, private readonly ttlMs = TTL_MS, private readonly maxEntries = MAX_ENTRIES) {}

  /**
   * The cached answer for `token`, at once (no promise: most requests are answered from
   * here), else a promise of the lookup's (remembered when it found someone).
   */
  resolve(token: string, now = Date.now()): T | Promise<T | undefined> {
    const digest = digestOf(token);
    const hit = this.entries.get(digest);
    if (hit && hit.until > now) return hit.found;
    if (hit) this.entries.delete(digest);
    const under = this.pending.get(digest);
    if (under && under.began + this.ttlMs > now) return under.lookup;
    const lookup = this.lookUp(digest, now);
    this.pending.set(digest, { lookup, began: now });
    return lookup;
  }

  private async lookUp(digest: string, now: number): Promise<T | undefined> {
    const generation = this.generation;
    try {
      const found = await this.lookup(digest);
      if (found !== undefined && generation === this.generation) {
        if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
        this.entries.set(digest, { found, until: now + this.ttlMs });
      }
      return found;
    } finally {
      if (generation === this.generation && this.pending.get(digest)?.began === now) this.pending.delete(digest);
    }
  }

  /** Forgets everything (a write that may change some caller committed); lookups under way are not joined any more. */
  forget() {
    this.generation++;
    this.entries.clear();
    this.pending.clear();
  }

  get size() {
    return this.entries.size;
  }
}
