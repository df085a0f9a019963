// Event retention: an event whose every delivery was made (or logged) longer ago than the
// retention (--event-retention, EDGEFORM_EVENT_RETENTION, 72h by default) is deleted with its
// delivery rows, so the outbox stops growing with every change. An event any destination has
// still to receive is never deleted, however old. The pruning runs on a timer, off the request
// path, in batches of BATCH events, each its own short write transaction (on SQLite the one
// writer is held for one batch at a time, not for the whole pass).
import type { Database } from '../store/db.js';

export const DEFAULT_EVENT_RETENTION = '72h';

/** Events deleted per write transaction. */
const BATCH = 500;

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `<n>s`, `<n>m`, `<n>h` or `<n>d` (a whole number), or `0` to keep delivered events for ever;
 * at most 3650d. Throws naming `name` otherwise.
 */
export function parseRetention(name: string, value: string): number {
  const m = /^(\d{1,7})([smhd])$/.exec(value.trim());
  if (value.trim() === '0') return 0;
  const ms = m ? Number(m[1]) * UNITS[m[2]] : NaN;
  if (!m || ms < 1000 || ms > 3650 * UNITS.d) {
    throw new Error(`${name} takes a duration such as 72h, 30m, 7d or 90s (from 1s to 3650d), or 0 to keep delivered events for ever, not ${JSON.stringify(value)}`);
  }
  return ms;
}

/** How often a pass runs: a quarter of the retention, between 1 s and 10 minutes. */
export const pruneEvery = (retentionMs: number) => Math.min(10 * 60_000, Math.max(1000, Math.floor(retentionMs / 4)));

/**
 * Deletes the events older than `retentionMs` whose deliveries were all made before then, in
 * batches; returns how many events went. Events wanted by no destination any more (a deleted
 * destination takes its pending deliveries with it) go too.
 */
export async function pruneDeliveredEvents(db: Database, retentionMs: number, now = Date.now()): Promise<number> {
  const cutoff = new Date(now - retentionMs);
  let after = -1;
  let pruned = 0;
  for (;;) {
    const old = await db.prisma.event.findMany({ where: { seq: { gt: after }, createdAt: { lt: cutoff } }, orderBy: { seq: 'asc' }, take: BATCH, select: { seq: true } });
    if (!old.length) return pruned;
    const seqs = old.map((e) => e.seq);
    after = seqs[seqs.length - 1];
    // Pending deliveries, and ones made within the retention, keep their event.
    const kept = new Set(
      (await db.prisma.delivery.findMany({ where: { eventSeq: { in: seqs }, OR: [{ deliveredAt: null }, { deliveredAt: { gte: cutoff } }] }, select: { eventSeq: true } })).map((d) => d.eventSeq),
    );
    const gone = seqs.filter((s) => !kept.has(s));
    if (gone.length) {
      // A delivery is never made pending again, and none is added to an existing event: what was checked above still holds.
      await db.prisma.$transaction([
        db.prisma.delivery.deleteMany({ where: { eventSeq: { in: gone }, deliveredAt: { lt: cutoff } } }),
        db.prisma.event.deleteMany({ where: { seq: { in: gone } } }),
      ]);
      pruned += gone.length;
    }
    if (old.length < BATCH) return pruned;
    // Between batches, let requests' writes in.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Runs pruneDeliveredEvents every pruneEvery(retention) until stopped; 0 turns it off. */
export class EventPruner {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly db: Database,
    private readonly retentionMs: number,
    private readonly warn: (fields: Record<string, unknown>) => void,
  ) {}

  start() {
    if (this.retentionMs > 0) this.schedule();
  }

  private schedule() {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = pruneDeliveredEvents(this.db, this.retentionMs)
        .then(() => undefined)
        .catch((e) => {
          if (!this.stopped) this.warn({ level: 'warn', msg: 'pruning delivered events failed; will retry', error: String((e as Error).message ?? e).split('\n').at(-1) });
        })
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, pruneEvery(this.retentionMs));
    this.timer.unref();
  }

  async stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
