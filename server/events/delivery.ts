// Delivers the outbox to `http` event destinations: each event is POSTed as JSON, signed
// with HMAC-SHA256 of the body when the destination has a secret, at least once, in event
// order per destination (only the oldest undelivered event of a destination is tried, so
// a failing destination holds its later events back), with exponential backoff. Each send
// ends by its deadline, destinations never wait on each other, and connections to one
// origin are capped.
//
// Several server instances may share one database: an instance claims a destination's
// oldest pending delivery by moving its next attempt past a lease, with a conditional
// update that only one instance can win. A crash mid-send leaves the lease to expire and
// the event is sent again (at least once). A graceful stop (SIGTERM) takes no new work and
// lets the sends in flight finish (each within its deadline) and records their outcome, so
// an event answered before the stop is not sent again after it.
import { createHmac } from 'node:crypto';
import { mergeSecrets } from '../../provider/catalog/walk.js';
import type { Agent } from 'undici';
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
  /** Deadline of one send, connecting included (EDGEFORM_EVENT_DELIVERY_TIMEOUT_MS). */
  timeoutMs: number;
  /** How long a claimed delivery is reserved for the claiming instance (raised to cover a send). */
  leaseMs: number;
  /** Destinations served at once; each has its own lane, so one slow destination holds one lane only. */
  concurrency: number;
  /** Open connections per destination origin (host and port), at most. */
  connectionsPerOrigin: number;
}

export const DELIVERY_DEFAULTS: DeliveryOptions = {
  pollMs: 1000,
  backoffMs: 1000,
  maxBackoffMs: 10 * 60_000,
  timeoutMs: 10_000,
  leaseMs: 60_000,
  concurrency: 64,
  connectionsPerOrigin: 4,
};

export const SIGNATURE_HEADER = 'Service-Signature';

/** `sha256=<hex HMAC-SHA256 of the raw body under the destination's secret>`. */
export const signatureOf = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;

type Doc = Record<string, any>;

/**
 * Runs one lane per destination with something due, up to `concurrency` lanes: a pass only
 * finds due destinations and starts their lanes, it never waits for a send, so a destination
 * that never answers holds its own lane (for at most the send deadline) and nobody else's.
 */
export class DeliveryWorker {
  private readonly opts: DeliveryOptions;
  /** undici and its Agent, made at the first send: loading undici was a tenth of a CPU second or more of every serve start (issue 29). */
  private undici?: Promise<{ request: typeof import('undici').request; dispatcher: Agent }>;
  /** Destinations with a lane running, and the lanes themselves. */
  private readonly lanes = new Map<string, Promise<void>>();
  private timer?: NodeJS.Timeout;
  private wakeAt = Infinity;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly server: ServerContext,
    private readonly log: (line: string) => void,
    private readonly userAgent: string,
    opts: Partial<DeliveryOptions> = {},
  ) {
    const o = { ...DELIVERY_DEFAULTS, ...opts };
    // A lease shorter than a send would let another instance send the same event meanwhile.
    this.opts = { ...o, leaseMs: Math.max(o.leaseMs, 3 * o.timeoutMs + 5_000) };
  }

  private http() {
    return (this.undici ??= import('undici').then(({ Agent, request }) => ({
      request,
      dispatcher: new Agent({
        connections: this.opts.connectionsPerOrigin,
        connect: { timeout: this.opts.timeoutMs },
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      }),
    })));
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

  /**
   * Stops taking work and waits for the sends in flight to finish (each ends by its deadline,
   * EDGEFORM_EVENT_DELIVERY_TIMEOUT_MS) and their outcome to be recorded: aborting them would
   * send those events again after the restart, though their destinations had them.
   */
  async stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await Promise.allSettled([...this.lanes.values()]);
    if (this.undici) await (await this.undici).dispatcher.destroy().catch(() => {});
  }

  /** Runs a pass in `ms`, unless one is already due sooner. */
  private schedule(ms: number) {
    if (this.stopped) return;
    const at = Date.now() + ms;
    if (this.timer && at >= this.wakeAt) return;
    clearTimeout(this.timer);
    this.wakeAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.wakeAt = Infinity;
      void this.run();
    }, ms);
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

  /** Starts a lane for each destination with something due and no lane yet. */
  private async pass() {
    const due = await this.prisma.delivery.groupBy({ by: ['destinationId'], where: { deliveredAt: null, nextAttemptAt: { lte: new Date() } } });
    for (const { destinationId } of due) {
      if (this.stopped || this.lanes.size >= this.opts.concurrency) break;
      if (this.lanes.has(destinationId)) continue;
      const lane = this.drain(destinationId)
        .catch((e) => {
          // The claim, if any, lapses with its lease and the event is tried again then.
          if (!this.stopped) this.warn('event delivery failed; will retry', { destination_id: destinationId, error: describeError(e).reason });
        })
        .finally(() => {
          this.lanes.delete(destinationId);
          // A lane ending frees room for destinations that found none.
          this.kick();
        });
      this.lanes.set(destinationId, lane);
    }
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
      // Another instance claimed it: that instance serves this destination for now.
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
      const delay = Math.min(this.opts.backoffMs * 2 ** (attempt - 1), this.opts.maxBackoffMs);
      await this.prisma.delivery.update({ where: key, data: { attempts: attempt, lastError: failure, nextAttemptAt: new Date(Date.now() + delay) } });
      // The target's URL may carry credentials, so the log names the destination, not the URL.
      this.warn('event delivery failed; will retry', { destination_id: destinationId, event_id: event.id, attempt, retry_in_ms: delay, error: failure });
      this.schedule(delay);
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
    // The deadline is a timer this send holds itself: a signal only referenced through
    // AbortSignal.any() can be garbage-collected in Node 20 and then never fires.
    const deadline = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      deadline.abort();
    }, this.opts.timeoutMs);
    try {
      const { request, dispatcher } = await this.http();
      const res = await request(http.url, { method: 'POST', headers, body, signal: deadline.signal, dispatcher });
      await res.body.dump().catch(() => {});
      return res.statusCode >= 200 && res.statusCode < 300 ? undefined : `HTTP ${res.statusCode}`;
    } catch (e) {
      const err = e as Error & { code?: string; cause?: { code?: string; message?: string } };
      if (timedOut || err.code === 'UND_ERR_HEADERS_TIMEOUT' || err.code === 'UND_ERR_BODY_TIMEOUT' || err.code === 'UND_ERR_CONNECT_TIMEOUT') {
        return `no response within ${this.opts.timeoutMs} ms`;
      }
      return err.cause?.code ?? err.code ?? err.cause?.message ?? err.message;
    } finally {
      clearTimeout(timer);
    }
  }

  private warn(msg: string, extra: Doc) {
    this.log(JSON.stringify({ time: new Date().toISOString(), level: 'warn', msg, ...extra }));
  }
}
