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
}

const CHANNEL = 'edgeform_gateway';

interface Message { to: string; from: string; id: string; type: 'command' | 'reply'; session?: string; action?: string; reply?: BusReply }

class PgBus implements Bus {
  private client?: import('pg').Client;
  private pending = new Map<string, (r: BusReply) => void>();
  constructor(private url: string, private instanceId: string, private log: (msg: string) => void) {}

  async start(handler: BusHandler) {
    const { default: Pg } = await import('pg');
    const client = new Pg.Client({ connectionString: this.url });
    this.client = client;
    client.on('error', (e) => this.log(`gateway bus: ${e.message}`));
    await client.connect();
    client.on('notification', (n) => {
      let m: Message;
      try {
        m = JSON.parse(n.payload ?? '');
      } catch {
        return;
      }
      if (m.to !== this.instanceId) return;
      if (m.type === 'reply') {
        this.pending.get(m.id)?.(m.reply ?? { ok: false });
        this.pending.delete(m.id);
      } else if (m.type === 'command' && m.session && m.action) {
        void handler(m.session, m.action)
          .catch((e): BusReply => ({ ok: false, error_code: e.code ?? 'ERR_SERVICE_500', msg: e.message }))
          .then((reply) => this.send({ to: m.from, from: this.instanceId, id: m.id, type: 'reply', reply }));
      }
    });
    await client.query(`LISTEN ${CHANNEL}`);
  }

  private async send(m: Message) {
    await this.client?.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify(m)]).catch((e) => this.log(`gateway bus: ${e.message}`));
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
    await this.client?.end().catch(() => {});
  }
}

class LocalBus implements Bus {
  async start() {}
  async request(): Promise<BusReply> {
    return { ok: false, error_code: 'ERR_SERVICE_300', msg: 'the tunnel session is not online' };
  }
  async stop() {}
}

export function busFor(db: Database, url: string, instanceId: string, log: (msg: string) => void): Bus {
  return db.provider === 'postgresql' ? new PgBus(url, instanceId, log) : new LocalBus();
}
