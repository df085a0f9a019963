// The per-key API rate limit: a sliding window of 60 seconds over each key's requests.
// Kept in memory per server instance (with several instances each enforces its own share).

export class RateLimiter {
  private readonly hits = new Map<string, number[]>();
  private calls = 0;
  constructor(private readonly perMinute: number, private readonly windowMs = 60_000) {}

  /** Records a request; returns 0 when allowed, else the seconds until one would be. */
  take(key: string, now = Date.now()): number {
    if (this.perMinute <= 0) return 0;
    const since = now - this.windowMs;
    if (++this.calls % 1000 === 0) this.forget(since);
    const list = (this.hits.get(key) ?? []).filter((t) => t > since);
    if (list.length >= this.perMinute) {
      this.hits.set(key, list);
      return Math.max(1, Math.ceil((list[0] + this.windowMs - now) / 1000));
    }
    list.push(now);
    this.hits.set(key, list);
    return 0;
  }

  /** Keys tracked (for tests). */
  get size() {
    return this.hits.size;
  }

  /** Drops keys with no request in the window, so deleted or idle keys cost no memory. */
  private forget(since: number) {
    for (const [key, list] of this.hits) if (!list.length || list[list.length - 1] <= since) this.hits.delete(key);
  }
}
