// What one ingress server keeps between requests for its policies: the rate-limit buckets.
// SPEC: capacity is per ingress server; each server counts independently, so each holds one.
import { DEFAULT_MAX_BUCKETS, SlidingWindows, type WindowStats } from './sliding-window.js';

export interface PolicyStateOptions {
  /** Live rate-limit buckets at most; the idlest is evicted (and counted) past it. */
  maxBuckets?: number;
}

export class PolicyState {
  readonly windows: SlidingWindows;

  constructor(opts: PolicyStateOptions = {}) {
    this.windows = new SlidingWindows(opts.maxBuckets ?? DEFAULT_MAX_BUCKETS);
  }

  stats(): WindowStats {
    return this.windows.stats();
  }
}
