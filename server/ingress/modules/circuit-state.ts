// The circuit breaker's state machine, pure (time is passed in): a rolling window of
// `num_buckets` buckets counts requests and errors; closed, it trips open when the window
// holds at least `volume_threshold` requests and an error share at or over the threshold;
// open, it refuses for `tripped_duration`; then half-open, one trial request goes through:
// its success closes the circuit (counts cleared), its failure opens it again.

export interface BreakerConfig {
  trippedDurationMs: number;
  rollingWindowMs: number;
  numBuckets: number;
  volumeThreshold: number;
  /** 0..1 */
  errorThreshold: number;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

export function breakerConfig(m: { tripped_duration?: number; rolling_window?: number; num_buckets?: number; volume_threshold?: number; error_threshold_percentage?: number }): BreakerConfig {
  return {
    trippedDurationMs: (m.tripped_duration ?? 10) * 1000,
    rollingWindowMs: (m.rolling_window || 10) * 1000,
    numBuckets: m.num_buckets || 10,
    volumeThreshold: m.volume_threshold ?? 20,
    errorThreshold: m.error_threshold_percentage ?? 0.5,
  };
}

export class CircuitBreaker {
  private buckets: { index: number; total: number; errors: number }[];
  private width: number;
  private openedAt = 0;
  private trialInFlight = false;
  state: BreakerState = 'closed';

  constructor(private cfg: BreakerConfig) {
    this.buckets = Array.from({ length: cfg.numBuckets }, () => ({ index: -1, total: 0, errors: 0 }));
    this.width = Math.max(1, cfg.rollingWindowMs / cfg.numBuckets);
  }

  /** May a request go upstream now? Open past its duration becomes half-open and lets one trial through. */
  allow(now: number): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (now - this.openedAt < this.cfg.trippedDurationMs) return false;
      this.state = 'half-open';
      this.trialInFlight = false;
    }
    if (this.trialInFlight) return false;
    this.trialInFlight = true;
    return true;
  }

  /** Seconds until an open circuit lets a trial through (at least 1). */
  retryAfter(now: number): number {
    return Math.max(1, Math.ceil((this.openedAt + this.cfg.trippedDurationMs - now) / 1000));
  }

  /** The outcome of a request that `allow` let through. */
  record(now: number, error: boolean) {
    if (this.state === 'half-open') {
      this.trialInFlight = false;
      if (error) this.trip(now);
      else this.reset();
      return;
    }
    if (this.state === 'open') return;
    const index = Math.floor(now / this.width);
    const b = this.buckets[index % this.buckets.length];
    if (b.index !== index) { b.index = index; b.total = 0; b.errors = 0; }
    b.total++;
    if (error) b.errors++;
    let total = 0;
    let errors = 0;
    for (const x of this.buckets) if (x.index > index - this.buckets.length) { total += x.total; errors += x.errors; }
    if (total >= this.cfg.volumeThreshold && errors > 0 && errors / total >= this.cfg.errorThreshold) this.trip(now);
  }

  private trip(now: number) {
    this.state = 'open';
    this.openedAt = now;
  }

  private reset() {
    this.state = 'closed';
    for (const b of this.buckets) { b.index = -1; b.total = 0; b.errors = 0; }
  }
}
