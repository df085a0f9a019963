// The per-key API rate limit and the failed-authentication limit per address: a sliding
// window over each key's requests, kept in memory per server instance (with several
// instances each enforces its own share). The window is the policy engine's sliding-window
// counter (server/policy/sliding-window.ts): constant work per request whatever the limit,
// where a log of every request's time made each request cost as many steps as the window
// held (at a limit of a million per minute, 25,000 req/s fell to 1,900).
import { DEFAULT_MAX_BUCKETS, SlidingWindows } from '../policy/sliding-window.js';

export class RateLimiter {
  private readonly windows: SlidingWindows;

  /** `maxKeys` bounds the memory whoever picks the keys (client addresses) can make it hold. */
  constructor(private readonly perMinute: number, private readonly windowMs = 60_000, maxKeys = DEFAULT_MAX_BUCKETS) {
    this.windows = new SlidingWindows(maxKeys);
  }

  /** Records a request (counting `n`, a batch's weight: docs/api.md); returns 0 when allowed, else the seconds until it would be. */
  take(key: string, now = Date.now(), n = 1): number {
    if (this.perMinute <= 0) return 0;
    return this.windows.take(key, this.perMinute, this.windowMs, now, n);
  }

  /** The most a request may count and ever be allowed (undefined: no limit). */
  get capacity(): number | undefined {
    return this.perMinute > 0 ? this.perMinute : undefined;
  }

  /** Keys tracked (for tests); idle ones go as new ones arrive, and at most `maxKeys` are held. */
  get size() {
    return this.windows.stats().buckets;
  }
}

/** Failed authentications per client address, at most 10,000 addresses tracked (the API and the agent endpoint share one). */
export function authFailureCounter(perMinute: number, windowMs?: number): RateLimiter {
  return new RateLimiter(perMinute, windowMs, 10_000);
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
