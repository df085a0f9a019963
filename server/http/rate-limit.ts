// The per-key API rate limit: a sliding window of 60 seconds over each key's requests.
// Kept in memory per server instance (with several instances each enforces its own share).

export class RateLimiter {
  private readonly hits = new Map<string, number[]>();
  constructor(private readonly perMinute: number, private readonly windowMs = 60_000) {}

  /** Records a request; returns 0 when allowed, else the seconds until one would be. */
  take(key: string, now = Date.now()): number {
    if (this.perMinute <= 0) return 0;
    const since = now - this.windowMs;
    const list = (this.hits.get(key) ?? []).filter((t) => t > since);
    if (list.length >= this.perMinute) {
      this.hits.set(key, list);
      return Math.max(1, Math.ceil((list[0] + this.windowMs - now) / 1000));
    }
    list.push(now);
    this.hits.set(key, list);
    return 0;
  }
}
