// The per-key API rate limit: a sliding window of 60 seconds over each key's requests.
// Kept in memory per server instance (with several instances each enforces its own share).

export class RateLimiter {
  private readonly hits = new Map<string, number[]>();
  private calls = 0;
  /** `maxKeys` bounds the memory whoever picks the keys (client addresses) can make it hold. */
  constructor(private readonly perMinute: number, private readonly windowMs = 60_000, private readonly maxKeys = Infinity) {}

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
    if (!this.hits.has(key) && this.hits.size >= this.maxKeys) {
      this.forget(since);
      // Still full: the longest-tracked key goes (a flood of new keys forgets the oldest first).
      if (this.hits.size >= this.maxKeys) this.hits.delete(this.hits.keys().next().value!);
    }
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

/**
 * The key a client address is limited by: an IPv4 address (also IPv4-mapped IPv6) as is,
 * an IPv6 address by its /64, the smallest block one subscriber is usually given, so that
 * one client cannot get a fresh allowance per address of its own network.
 */
export function clientKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1];
  if (!address.includes(':')) return address;
  const [head, tail = ''] = address.split('%')[0].toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = address.includes('::') && tail ? tail.split(':') : [];
  const groups = address.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
