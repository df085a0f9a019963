// The rate-limit buckets: a sliding-window counter per bucket, O(1) per decision and a few
// dozen bytes per live bucket, with idle buckets expiring and a cap on how many live at once.
//
// The window is the sliding-window counter of common edges: fixed windows of `width`, and
// the estimate of requests in the last `width` is the current window's count plus the
// previous window's count weighted by how much of it the sliding window still overlaps. A
// request is let through while that estimate is below the capacity; refused requests do not
// count (capacity is what reaches upstream). An exact sliding log would hold up to
// `capacity` timestamps (2,000,000,000) per bucket.
//
// A bucket's windows start at its first request (and start afresh after two quiet windows),
// not at multiples of the width since the epoch: every bucket does not roll over at once,
// and `edgeform policy test` gives the same answers whatever the wall clock says.

/** Buckets held at once unless the state is told otherwise (about 30 MB at most). */
export const DEFAULT_MAX_BUCKETS = 250_000;

const INITIAL_SLOTS = 1024;

/**
 * A bucket's four numbers, side by side in one Float64Array (32 bytes, half a cache line):
 * where its current window starts (ms), the previous and current windows' counts, and the
 * window's width (ms). One array rather than one per field: with a million buckets a
 * decision touches one cache line of the array instead of four or five.
 */
const STRIDE = 4;
const START = 0;
const PREV = 1;
const CURR = 2;
const WIDTH = 3;

export interface WindowStats {
  /** Live buckets. */
  buckets: number;
  /** Buckets dropped while still counting, because the cap was reached (their clients start afresh). */
  evictions: number;
  /** Idle buckets removed after two quiet windows. */
  expired: number;
}

export class SlidingWindows {
  /** Key -> slot in `cells`; Map order is the order buckets last changed window. */
  private readonly slots = new Map<string, number>();
  private cells = new Float64Array(INITIAL_SLOTS * STRIDE);
  private readonly free: number[] = [];
  private used = 0;
  private evictions = 0;
  private expired = 0;

  constructor(readonly maxBuckets = DEFAULT_MAX_BUCKETS) {
    if (!Number.isInteger(maxBuckets) || maxBuckets < 1) throw new RangeError('maxBuckets must be a positive integer');
  }

  stats(): WindowStats {
    return { buckets: this.slots.size, evictions: this.evictions, expired: this.expired };
  }

  /**
   * Counts a request of `n` units (1 by default) against `key` (a window of `widthMs`,
   * `capacity` units) at `now` (ms). Returns 0 when it is let through, else the whole seconds
   * until it would be (at least 1). `n` above `capacity` never fits: a RangeError.
   */
  take(key: string, capacity: number, widthMs: number, now: number, n = 1): number {
    if (n > capacity) throw new RangeError(`${n} units can never fit a capacity of ${capacity}`);
    const cells = this.cells;
    const slot = this.slots.get(key);
    let at = slot === undefined ? -1 : slot * STRIDE;
    const ahead = at < 0 ? 0 : now - cells[at + START];
    if (at < 0 || ahead < 0 || ahead >= 2 * widthMs || cells[at + WIDTH] !== widthMs) {
      // A new bucket, or one quiet for two windows (both counts would be 0): it starts now.
      if (slot === undefined) {
        const fresh = this.allocate(now);
        this.slots.set(key, fresh);
        at = fresh * STRIDE;
      } else {
        this.slots.delete(key);
        this.slots.set(key, slot);
      }
      const c = this.cells;
      c[at + START] = now;
      c[at + PREV] = 0;
      c[at + CURR] = 0;
      c[at + WIDTH] = widthMs;
    } else if (ahead >= widthMs) {
      // The next window: the current count becomes the previous one.
      cells[at + START] += widthMs;
      cells[at + PREV] = cells[at + CURR];
      cells[at + CURR] = 0;
      // Keep the Map ordered by last window change, so the head is the idlest bucket.
      this.slots.delete(key);
      this.slots.set(key, slot!);
    }
    const c = this.cells;
    const start = c[at + START];
    const prev = c[at + PREV];
    const curr = c[at + CURR];
    // n units fit where one would with n - 1 fewer in the capacity.
    const room = capacity - (n - 1);
    if (fits(prev, curr, room, widthMs, now - start)) {
      c[at + CURR] = curr + n;
      return 0;
    }
    return retryAfter(prev, curr, room, widthMs, start, now);
  }

  private allocate(now: number): number {
    this.expireIdle(now);
    if (this.slots.size >= this.maxBuckets) {
      const [key, slot] = this.slots.entries().next().value as [string, number];
      this.slots.delete(key);
      this.free.push(slot);
      this.evictions++;
    }
    const reused = this.free.pop();
    if (reused !== undefined) return reused;
    if (this.used * STRIDE === this.cells.length) this.grow();
    return this.used++;
  }

  /** Removes up to two idle buckets from the head: amortised O(1), and enough to keep up. */
  private expireIdle(now: number) {
    for (let i = 0; i < 2; i++) {
      const head = this.slots.entries().next();
      if (head.done) return;
      const [key, slot] = head.value;
      const at = slot * STRIDE;
      if (this.cells[at + START] + 2 * this.cells[at + WIDTH] > now) return;
      this.slots.delete(key);
      this.free.push(slot);
      this.expired++;
    }
  }

  private grow() {
    const slots = Math.min((this.cells.length / STRIDE) * 2, Math.max(this.maxBuckets, INITIAL_SLOTS));
    const cells = new Float64Array(slots * STRIDE);
    cells.set(this.cells);
    this.cells = cells;
  }
}

/** The estimate of requests in the sliding window at `elapsed` ms into the current window. */
export const estimate = (prev: number, curr: number, widthMs: number, elapsed: number) => (prev * (widthMs - elapsed)) / widthMs + curr;

const fits = (prev: number, curr: number, capacity: number, widthMs: number, elapsed: number) => estimate(prev, curr, widthMs, elapsed) < capacity;

/** Whether a request fits at `t`, when nothing more is let through after the current window's count. */
function fitsLater(prev: number, curr: number, capacity: number, widthMs: number, start: number, t: number): boolean {
  const ahead = Math.floor((t - start) / widthMs);
  const elapsed = t - start - ahead * widthMs;
  if (ahead === 0) return fits(prev, curr, capacity, widthMs, elapsed);
  if (ahead === 1) return fits(curr, 0, capacity, widthMs, elapsed);
  return capacity > 0;
}

/** Whole seconds from `now` until a request fits, if no other request is let through meanwhile. */
function retryAfter(prev: number, curr: number, capacity: number, widthMs: number, start: number, now: number): number {
  // When it fits: later in this window as the previous one's weight fades, or, when this
  // window is full, in the next one as this window's count fades in turn.
  const at = curr < capacity ? start + widthMs - ((capacity - curr) * widthMs) / prev : start + 2 * widthMs - (capacity * widthMs) / curr;
  let seconds = Math.max(1, Math.ceil((at - now) / 1000));
  // The closed form is exact but for floating-point rounding; settle it on the estimate itself.
  while (seconds > 1 && fitsLater(prev, curr, capacity, widthMs, start, now + (seconds - 1) * 1000)) seconds--;
  while (!fitsLater(prev, curr, capacity, widthMs, start, now + seconds * 1000)) seconds++;
  return seconds;
}
