// Messages between server instances, for agent commands: the instance that receives the API
// call asks the instance that holds the agent's connection. On PostgreSQL this is
// LISTEN/NOTIFY on one channel (no extra infrastructure); on SQLite there is one instance,
// so no message ever needs to travel.
import type { Database } from '../store/db.js';
import { newIdBody } from '../store/ids.js';

export interface BusReply { ok: boolean; error_code?: string; msg?: string }
export type BusHandler = (sessionId: string, action: string) => Promise<BusReply>;

export interface Bus {
  start(handler: BusHandler): Promise<void>;
  /** Asks instance `to`; rejects after `timeoutMs`. */
  request(to: string, sessionId: string, action: string, timeoutMs: number): Promise<BusReply>;
  stop(): Promise<void>;
  /** For /healthz and /metrics. */
  readonly state: BusState;
  readonly reconnects: number;
}

const CHANNEL = 'edgeform_gateway';

interface Message { to: string; from: string; id: string; type: 'command' | 'reply'; session?: string; action?: string; reply?: BusReply }

/** The bus's connection: `listening` (LISTEN in place), `connecting` (after a loss, backing off), `stopped`; `local` on SQLite. */
export type BusState = 'listening' | 'connecting' | 'stopped' | 'local';

const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5000;

/**
 * LISTEN/NOTIFY on a connection of its own. When that connection dies (a restart, a
 * failover, pg_terminate_backend) it is replaced, with a backoff from 250 ms to 5 s, and
 * LISTEN is sent again: without that, every command to another instance would go
 * unanswered (504) until a restart. A notification sent while no connection listened is
 * lost; its sender's request times out (504) and may be retried.
 */
class PgBus implements Bus {
  private client?: import('pg').Client;
  private pending = new Map<string, (r: BusReply) => void>();
  private handler?: BusHandler;
  private stopped = false;
  private retryMs = RETRY_FIRST_MS;
  private timer?: NodeJS.Timeout;
  state: BusState = 'connecting';
  /** Connections lost since start (each followed by a reconnect). */
  reconnects = 0;
  constructor(private url: string, private instanceId: string, private log: (msg: string) => void) {}

  async start(handler: BusHandler) {
    this.handler = handler;
    // The first connection is part of the start: a database that does not answer fails it (the start already waited for it).
    await this.connect(true);
  }

  private async connect(first = false) {
    if (this.stopped) return;
    const { default: Pg } = await import('pg');
    const client = new Pg.Client({ connectionString: this.url });
    this.client = client;
    let lostOnce = false;
    const lost = (e?: Error) => {
      if (lostOnce || this.stopped || this.client !== client) return;
      lostOnce = true;
      this.client = undefined;
      this.state = 'connecting';
      this.reconnects++;
      void client.end().catch(() => {});
      const wait = this.retryMs;
      this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
      this.log(`gateway bus: lost its connection (${e?.message ?? 'connection ended'}); connecting again in ${wait} ms`);
      this.timer = setTimeout(() => void this.connect(), wait);
      this.timer.unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (n) => this.received(n.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (e) {
      if (first) {
        lostOnce = true;
        this.client = undefined;
        void client.end().catch(() => {});
        throw e;
      }
      lost(e as Error);
      return;
    }
    if (this.client !== client) return;
    if (!first) this.log('gateway bus: listening again');
    this.state = 'listening';
    this.retryMs = RETRY_FIRST_MS;
  }

  private received(payload: string | undefined) {
    let m: Message;
    try {
      m = JSON.parse(payload ?? '');
    } catch {
      return;
    }
    if (m.to !== this.instanceId) return;
    if (m.type === 'reply') {
      this.pending.get(m.id)?.(m.reply ?? { ok: false });
      this.pending.delete(m.id);
    } else if (m.type === 'command' && m.session && m.action && this.handler) {
      void this.handler(m.session, m.action)
        .catch((e): BusReply => ({ ok: false, error_code: e.code ?? 'ERR_SERVICE_500', msg: e.message }))
        .then((reply) => this.send({ to: m.from, from: this.instanceId, id: m.id, type: 'reply', reply }));
    }
  }

  private async send(m: Message) {
    const client = this.client;
    if (!client || this.state !== 'listening') {
      this.log('gateway bus: not connected; the message is dropped (its sender times out)');
      return;
    }
    await client.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify(m)]).catch((e) => this.log(`gateway bus: ${e.message}`));
  }

  request(to: string, sessionId: string, action: string, timeoutMs: number): Promise<BusReply> {
    const id = newIdBody();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { this.pending.delete(id); reject(new Error('no answer from the instance holding the session')); }, timeoutMs);
      this.pending.set(id, (r) => { clearTimeout(timer); resolve(r); });
      void this.send({ to, from: this.instanceId, id, type: 'command', session: sessionId, action });
    });
  }

  async stop() {
    this.stopped = true;
    this.state = 'stopped';
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}

class LocalBus implements Bus {
  state: BusState = 'local';
  reconnects = 0;
  async start() {}
  async request(): Promise<BusReply> {
    return { ok: false, error_code: 'ERR_SERVICE_300', msg: 'the tunnel session is not online' };
  }
  async stop() {}
}

export function busFor(db: Database, url: string, instanceId: string, log: (msg: string) => void): Bus {
  return db.provider === 'postgresql' ? new PgBus(url, instanceId, log) : new LocalBus();
}
