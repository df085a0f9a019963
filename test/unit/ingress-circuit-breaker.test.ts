// The circuit breaker's state machine on a fake clock (server/ingress/modules/circuit-state.ts).
import { describe, expect, it } from 'vitest';
import { breakerConfig, CircuitBreaker } from '../../server/ingress/modules/circuit-state.js';

// 10 s window in 10 buckets; trips at 4 requests with half or more failing; open for 5 s.
const make = () => new CircuitBreaker(breakerConfig({ tripped_duration: 5, rolling_window: 10, num_buckets: 10, volume_threshold: 4, error_threshold_percentage: 0.5 }));
const run = (b: CircuitBreaker, now: number, error: boolean) => { expect(b.allow(now)).toBe(true); b.record(now, error); };

describe('circuit breaker state machine', () => {
  it('stays closed below the volume threshold even if every request fails', () => {
    const b = make();
    for (let i = 0; i < 3; i++) run(b, 1000 + i, true);
    expect(b.state).toBe('closed');
  });

  it('stays closed at the volume threshold when the error share is under the threshold', () => {
    const b = make();
    run(b, 1000, true); run(b, 1001, false); run(b, 1002, false); run(b, 1003, false);
    expect(b.state).toBe('closed');
  });

  it('trips at the volume threshold with an error share at the threshold, and refuses while open', () => {
    const b = make();
    run(b, 1000, true); run(b, 1001, false); run(b, 1002, true); run(b, 1003, false);
    expect(b.state).toBe('open');
    expect(b.allow(1004)).toBe(false);
    expect(b.allow(5999)).toBe(false);
    expect(b.retryAfter(1004)).toBe(5);
  });

  it('old buckets leave the rolling window: errors 10 s ago do not count', () => {
    const b = make();
    run(b, 0, true); run(b, 1, true); run(b, 2, true);
    run(b, 10_500, true);
    expect(b.state).toBe('closed');
  });

  it('after tripped_duration lets exactly one trial through (half-open); its success closes the circuit', () => {
    const b = make();
    for (let i = 0; i < 4; i++) run(b, 1000 + i, true);
    expect(b.state).toBe('open');
    expect(b.allow(6003)).toBe(true);
    expect(b.state).toBe('half-open');
    expect(b.allow(6004)).toBe(false);
    b.record(6010, false);
    expect(b.state).toBe('closed');
    // counts were cleared: three failures do not trip it again
    for (let i = 0; i < 3; i++) run(b, 6100 + i, true);
    expect(b.state).toBe('closed');
  });

  it('a failed trial opens the circuit again for a full tripped_duration', () => {
    const b = make();
    for (let i = 0; i < 4; i++) run(b, 1000 + i, true);
    expect(b.allow(7000)).toBe(true);
    b.record(7001, true);
    expect(b.state).toBe('open');
    expect(b.allow(12_000)).toBe(false);
    expect(b.allow(12_001)).toBe(true);
  });

  it('0 for num_buckets and rolling_window means the defaults (10 and 10 s)', () => {
    expect(breakerConfig({ num_buckets: 0, rolling_window: 0 })).toMatchObject({ numBuckets: 10, rollingWindowMs: 10_000 });
  });
});
