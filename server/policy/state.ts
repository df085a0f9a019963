// What one ingress server keeps between requests for its policies: the rate-limit buckets.
// SPEC: capacity is per ingress server; each server counts independently, so each holds one.
import { CircuitBreaker, type BreakerConfig } from '../ingress/modules/circuit-state.js';
import { DEFAULT_MAX_BUCKETS, SlidingWindows, type WindowStats } from './sliding-window.js';

export interface PolicyStateOptions {
  /** Live rate-limit buckets at most; the idlest is evicted (and counted) past it. */
  maxBuckets?: number;
}

/** circuit-breaker states kept per ingress server (one per policy and settings). */
export const MAX_BREAKERS = 10_000;

export class PolicyState {
  readonly windows: SlidingWindows;

  constructor(opts: PolicyStateOptions = {}) {
    this.windows = new SlidingWindows(opts.maxBuckets ?? DEFAULT_MAX_BUCKETS);
  }

  /** circuit-breaker actions' breakers, by policy scope and settings (the route module's state machine). */
  private readonly breakers = new Map<string, CircuitBreaker>();

  /** The breaker of `key`, made on first use; at most MAX_BREAKERS are kept (the oldest is dropped). */
  breaker(key: string, cfg: BreakerConfig): CircuitBreaker {
    let b = this.breakers.get(key);
    if (!b) {
      if (this.breakers.size >= MAX_BREAKERS) this.breakers.delete(this.breakers.keys().next().value!);
      this.breakers.set(key, (b = new CircuitBreaker(cfg)));
    }
    return b;
  }

  stats(): WindowStats {
    return this.windows.stats();
  }
}
