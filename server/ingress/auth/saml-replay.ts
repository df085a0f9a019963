// Assertions already used, remembered until they expire, so the same signed assertion (or the
// ticket the edge made from it) signs nobody in twice. Memory is bounded: an assertion is
// remembered at most MAX_REMEMBER_MS (the edge refuses older ones: saml.ts's maxAssertionAgeMs),
// and at most MAX_ENTRIES at once; when full of live entries a new sign-in is refused
// rather than an entry forgotten early (filling it takes that many assertions signed by an IdP).
export const MAX_REMEMBER_MS = 60 * 60 * 1000;
export const MAX_ENTRIES = 100_000;
/** Beyond MAX_REMEMBER_MS, for the clock skew the edge accepts (saml.ts's 60 s, with room). */
const SKEW_ALLOWANCE_MS = 5 * 60 * 1000;

export class UsedAssertions {
  /** key -> remembered until (ms); Map order is insertion order. */
  private readonly until = new Map<string, number>();

  constructor(private readonly max = MAX_ENTRIES) {}

  /** 'fresh' (now remembered), 'replayed', or 'full'. */
  use(key: string, expiresAt: number, now: number): 'fresh' | 'replayed' | 'full' {
    const known = this.until.get(key);
    if (known !== undefined && known > now) return 'replayed';
    if (this.until.size >= this.max) this.prune(now);
    if (this.until.size >= this.max) return 'full';
    this.until.delete(key);
    this.until.set(key, Math.min(expiresAt, now + MAX_REMEMBER_MS + SKEW_ALLOWANCE_MS));
    return 'fresh';
  }

  get size() {
    return this.until.size;
  }

  private prune(now: number) {
    for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
  }
}

/** One per server process: every SAML route's assertions (keys carry the route). */
export const usedAssertions = new UsedAssertions();
