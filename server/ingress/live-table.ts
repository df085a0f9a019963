// The table a server routes with, reloaded after every committed write on this instance
// (a request that arrives meanwhile waits for the new table, so a change is live on the
// next request) and, on PostgreSQL, when another instance says it wrote (LISTEN/NOTIFY,
// re-listening and reloading after a lost connection). Reloads coalesce: a burst of writes
// costs one or two reads of the store, never one per write.
import type { ServerContext } from '../resources/context.js';
import { newIdBody } from '../store/ids.js';
import { compileTable, loadSnapshot } from './table.js';
import type { IngressTable } from './types.js';

const CHANNEL = 'edgeform_ingress';
const RETRY_MS = 1000;

export class LiveTable {
  private table: IngressTable;
  private version = 0;
  private pending = false;
  private loading?: Promise<void>;
  private listener?: import('pg').Client;
  private stopped = false;
  private readonly instanceId = newIdBody();
  private retry?: NodeJS.Timeout;

  private constructor(private ctx: ServerContext, private databaseUrl: string, private log: (fields: Record<string, unknown>) => void) {
    this.table = compileTable([], 0);
  }

  static async start(ctx: ServerContext, databaseUrl: string, log: (fields: Record<string, unknown>) => void): Promise<LiveTable> {
    const live = new LiveTable(ctx, databaseUrl, log);
    live.table = compileTable(await loadSnapshot(ctx), ++live.version);
    if (ctx.db.provider === 'postgresql') await live.listen();
    return live;
  }

  /** The table now, without waiting (what a request already under way keeps using). */
  get now(): IngressTable {
    return this.table;
  }

  /** The table for a new request: after a write on this instance, the one that includes it. */
  current(): IngressTable | Promise<IngressTable> {
    return this.loading ? this.loading.then(() => this.table) : this.table;
  }

  /** A write committed on this instance: reload, and tell the other instances. */
  changed() {
    this.reload();
    if (this.ctx.db.provider === 'postgresql') {
      void this.ctx.db.prisma.$executeRawUnsafe('SELECT pg_notify($1, $2)', CHANNEL, this.instanceId).catch((e) => this.log({ level: 'warn', msg: `ingress: telling other instances of a change failed: ${(e as Error).message}` }));
    }
  }

  reload() {
    if (this.stopped) return;
    this.pending = true;
    this.loading ??= this.loop().finally(() => { this.loading = undefined; });
  }

  private async loop() {
    while (this.pending && !this.stopped) {
      this.pending = false;
      try {
        this.table = compileTable(await loadSnapshot(this.ctx), ++this.version);
      } catch (e) {
        this.log({ level: 'warn', msg: `ingress: reloading the routing table failed (the previous one stays in use; retrying in ${RETRY_MS} ms): ${(e as Error).message}` });
        clearTimeout(this.retry);
        this.retry = setTimeout(() => this.reload(), RETRY_MS);
        return;
      }
    }
  }

  private async listen() {
    const { default: Pg } = await import('pg');
    const client = new Pg.Client({ connectionString: this.databaseUrl });
    this.listener = client;
    const lost = (e?: Error) => {
      if (this.stopped || this.listener !== client) return;
      this.listener = undefined;
      this.log({ level: 'warn', msg: `ingress: lost the change notifications (${e?.message ?? 'connection ended'}); listening again in ${RETRY_MS} ms` });
      void client.end().catch(() => {});
      // Whatever changed meanwhile is read when listening resumes.
      setTimeout(() => void this.listen().then(() => this.reload()), RETRY_MS).unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (n) => {
      if (n.payload !== this.instanceId) this.reload();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (e) {
      lost(e as Error);
    }
  }

  async stop() {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.listener;
    this.listener = undefined;
    await client?.end().catch(() => {});
    await this.loading;
  }
}
