// Delivers the outbox to `http` event destinations: each event is POSTed as JSON, signed
// with HMAC-SHA256 of the body when the destination has a secret, at least once, in event
// order per destination (only the oldest undelivered event of a destination is tried, so
// a failing destination holds its later events back), with exponential backoff.
//
// Several server instances may share one database: an instance claims a destination's
// oldest pending delivery by moving its next attempt past a lease, with a conditional
// update that only one instance can win. A crash mid-send leaves the lease to expire and
// the event is sent again (at least once).
import { createHmac } from 'node:crypto';
import { mergeSecrets } from '../../provider/catalog/walk.js';
import { describeError } from '../http/reply.js';
import type { ServerContext } from '../resources/context.js';
import { findStored } from '../resources/engine.js';
import { eventBody, isLogTarget } from './outbox.js';
import { logTargetLine } from './log-target.js';

export interface DeliveryOptions {
  /** Longest sleep between passes when nothing is due sooner (other instances' events, retries). */
  pollMs: number;
  /** First retry delay; doubles per failed attempt up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Per-request timeout. */
  timeoutMs: number;
  /** How long a claimed delivery is reserved for the claiming instance. */
  leaseMs: number;
  /** Destinations served at once. */
  concurrency: number;
}

export const DELIVERY_DEFAULTS: DeliveryOptions = {
  pollMs: 1000,
  backoffMs: 1000,
  maxBackoffMs: 10 * 60_000,
  timeoutMs: 10_000,
  leaseMs: 60_000,
  concurrency: 4,
};

export const SIGNATURE_HEADER = 'Service-Signature';

/** `sha256=<hex HMAC-SHA256 of the raw body under the destination's secret>`. */
export const signatureOf = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;

type Doc = Record<string, any>;

export class DeliveryWorker {
  private readonly opts: DeliveryOptions;
  private readonly abort = new AbortController();
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly server: ServerContext,
    private readonly log: (line: string) => void,
    private readonly userAgent: string,
    opts: Partial<DeliveryOptions> = {},
  ) {
    this.opts = { ...DELIVERY_DEFAULTS, ...opts };
  }

  start() {
    this.schedule(0);
  }

  /** Something may be due now (a write committed): run a pass soon. */
  kick() {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  /** Stops taking work, aborts sends in flight (they are retried on the next start) and waits for the pass to end. */
  async stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort.abort();
    await this.running;
  }

  private schedule(ms: number) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), ms);
    this.timer.unref();
  }

  private async run() {
    if (this.stopped || this.running) return;
    let wait = this.opts.pollMs;
    this.running = (async () => {
      try {
        await this.pass();
        wait = await this.untilNextDue();
      } catch (e) {
        if (!this.stopped) this.warn('event delivery pass failed', { error: describeError(e).reason });
      }
    })();
    await this.running;
    this.running = undefined;
    if (this.stopped) return;
    const now = this.again;
    this.again = false;
    this.schedule(now ? 0 : wait);
  }

  private get prisma() {
    return this.server.db.prisma;
  }

  private async untilNextDue(): Promise<number> {
    const next = await this.prisma.delivery.findFirst({ where: { deliveredAt: null }, orderBy: { nextAttemptAt: 'asc' }, select: { nextAttemptAt: true } });
    if (!next) return this.opts.pollMs;
    return Math.max(0, Math.min(this.opts.pollMs, next.nextAttemptAt.getTime() - Date.now()));
  }

  private async pass() {
    const heads = await this.prisma.delivery.groupBy({ by: ['destinationId'], where: { deliveredAt: null } });
    const queue = heads.map((h) => h.destinationId);
    const workers = Array.from({ length: Math.min(this.opts.concurrency, queue.length) }, async () => {
      for (let id = queue.shift(); id !== undefined && !this.stopped; id = queue.shift()) await this.drain(id);
    });
    await Promise.all(workers);
  }

  /** Sends one destination's due events, oldest first, until one fails or none is due. */
  private async drain(destinationId: string) {
    while (!this.stopped) {
      const head = await this.prisma.delivery.findFirst({ where: { destinationId, deliveredAt: null }, orderBy: { eventSeq: 'asc' } });
      if (!head || head.nextAttemptAt.getTime() > Date.now()) return;
      const claimedUntil = new Date(Date.now() + this.opts.leaseMs);
      const claim = await this.prisma.delivery.updateMany({
        where: { destinationId, eventSeq: head.eventSeq, deliveredAt: null, nextAttemptAt: head.nextAttemptAt },
        data: { nextAttemptAt: claimedUntil },
      });
      if (claim.count !== 1) return;
      const key = { destinationId_eventSeq: { destinationId, eventSeq: head.eventSeq } };
      const destination = await findStored(this.server, destinationId);
      if (!destination) {
        // The destination was deleted: nothing is left to deliver to.
        await this.prisma.delivery.deleteMany({ where: { destinationId } });
        return;
      }
      const target = mergeSecrets(destination.body, destination.secretFields);
      const event = await this.prisma.event.findUnique({ where: { seq: head.eventSeq } });
      if (!event || isLogTarget(target)) {
        if (event) this.log(logTargetLine(destinationId, event));
        await this.prisma.delivery.update({ where: key, data: { deliveredAt: new Date() } });
        continue;
      }
      const attempt = head.attempts + 1;
      const failure = await this.send((target.target as Doc).http as { url: string; secret?: string }, eventBody(event), attempt);
      if (failure === undefined) {
        await this.prisma.delivery.update({ where: key, data: { deliveredAt: new Date(), attempts: attempt, lastError: null } });
        continue;
      }
      if (this.stopped) {
        // Interrupted by shutdown, not refused: release the claim so the next start retries at once.
        await this.prisma.delivery.update({ where: key, data: { nextAttemptAt: new Date() } });
        return;
      }
      const delay = Math.min(this.opts.backoffMs * 2 ** (attempt - 1), this.opts.maxBackoffMs);
      await this.prisma.delivery.update({ where: key, data: { attempts: attempt, lastError: failure, nextAttemptAt: new Date(Date.now() + delay) } });
      // The target's URL may carry credentials, so the log names the destination, not the URL.
      this.warn('event delivery failed; will retry', { destination_id: destinationId, event_id: event.id, attempt, retry_in_ms: delay, error: failure });
      return;
    }
  }

  /** POSTs one event; undefined on a 2xx, else why it failed. */
  private async send(http: { url: string; secret?: string }, event: Doc, attempt: number): Promise<string | undefined> {
    const body = JSON.stringify(event);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': this.userAgent,
      'service-event-id': event.id,
      'service-event-type': event.type,
      'service-delivery-attempt': String(attempt),
    };
    if (http.secret) headers[SIGNATURE_HEADER.toLowerCase()] = signatureOf(http.secret, body);
    try {
      const res = await fetch(http.url, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.opts.timeoutMs)]),
      });
      await res.body?.cancel().catch(() => {});
      return res.status >= 200 && res.status < 300 ? undefined : `HTTP ${res.status}`;
    } catch (e) {
      const err = e as Error & { cause?: { code?: string; message?: string } };
      if (err.name === 'TimeoutError') return `no response within ${this.opts.timeoutMs} ms`;
      return err.cause?.code ?? err.cause?.message ?? err.message;
    }
  }

  private warn(msg: string, extra: Doc) {
    this.log(JSON.stringify({ time: new Date().toISOString(), level: 'warn', msg, ...extra }));
  }
}
