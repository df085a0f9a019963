// The table a server routes with. A committed write on this instance names the rows it touched
// (ServerContext.afterCommit); those rows alone are read again and applied to the table
// (TableState.apply), making a new version that shares everything else: a change costs the
// rows it changed, not the size of the configuration. The write's API answer waits until the
// change is applied, so it is live on the next request, and no ingress request ever waits:
// each takes the table in use at once. A whole reload (at start, after the change notifications
// were lost, or when a change names more than MAX_IDS rows) is built beside the table in use,
// which keeps serving until the new one replaces it. On PostgreSQL, other instances are told
// the ids (LISTEN/NOTIFY) and apply them the same way.
import { performance } from 'node:perf_hooks';
import type { ServerContext } from '../resources/context.js';
import { newIdBody } from '../store/ids.js';
import { IpRuleSetBuilder } from './ip-rules.js';
import { isTableId, loadRules, loadSnapshot, TableState } from './table.js';
import type { IngressTable } from './types.js';

const CHANNEL = 'edgeform_ingress';
const RETRY_MS = 1000;
/** A change naming more rows than this is applied by a whole reload instead (in the background). */
export const MAX_IDS = 5000;
/** PostgreSQL's NOTIFY payload is at most 8000 bytes; past this the other instances reload whole. */
const MAX_PAYLOAD = 7000;

/** Reads the whole state: documents, then IP policy rules in batches of text (loadRules), each policy's set made once. */
export async function buildState(ctx: ServerContext, version: number, log?: (fields: Record<string, unknown>) => void): Promise<TableState> {
  const t0 = performance.now();
  const docs = await loadSnapshot(ctx);
  const st = TableState.build(docs, version);
  const builders = new Map<string, IpRuleSetBuilder>();
  const rules = await loadRules(ctx, (policyId) => {
    if (!st.hasPolicy(policyId)) return undefined;
    let b = builders.get(policyId);
    if (!b) builders.set(policyId, (b = new IpRuleSetBuilder()));
    return b;
  });
  for (const [id, b] of builders) st.setRules(id, b.build());
  log?.({ level: 'info', msg: `ingress: routing table read in ${Math.round(performance.now() - t0)} ms (${docs.length} resources, ${rules} IP policy rules)`, table_ms: Math.round(performance.now() - t0), resources: docs.length, ip_rules: rules });
  return st;
}

export class LiveTable {
  private state: TableState;
  private version = 0;
  /** Ids written and not yet applied. */
  private readonly pending = new Set<string>();
  /** An application of pending ids under way (a request waits for it). */
  private applying?: Promise<void>;
  private wholeWanted = false;
  private reloading?: Promise<void>;
  /** While a whole reload is read: the ids applied to the table in use meanwhile, applied again to the new one. */
  private sinceReload?: Set<string>;
  private listener?: import('pg').Client;
  private stopped = false;
  private readonly instanceId = newIdBody();
  private retry?: NodeJS.Timeout;
  /**
   * While the start reads the whole table: the rows written meanwhile (the API already answers,
   * and on PostgreSQL other instances write), applied to the table read before it serves.
   */
  private early?: { ids: Set<string>; whole: boolean };

  private constructor(private ctx: ServerContext, private databaseUrl: string, private log: (fields: Record<string, unknown>) => void) {
    this.state = TableState.build([], 0);
  }

  /**
   * Reads the whole table. `taken` gets the table before the read begins, for the writes
   * committed meanwhile (ServerContext.afterCommit): a read of a million rules takes seconds
   * while the API answers, and a rule written then is applied before the table serves, never
   * skipped. On PostgreSQL the other instances' changes are listened to before the read too.
   */
  static async start(ctx: ServerContext, databaseUrl: string, log: (fields: Record<string, unknown>) => void, taken?: (table: LiveTable) => void): Promise<LiveTable> {
    const live = new LiveTable(ctx, databaseUrl, log);
    live.early = { ids: new Set(), whole: false };
    taken?.(live);
    try {
      if (ctx.db.provider === 'postgresql') await live.listen();
      live.state = await buildState(ctx, ++live.version, log);
      for (;;) {
        const { ids, whole } = live.early;
        live.early = { ids: new Set(), whole: false };
        if (whole || ids.size > MAX_IDS) live.state = await buildState(ctx, ++live.version, log);
        else if (ids.size) await live.applyIds(live.state, [...ids]);
        else break;
      }
    } catch (e) {
      await live.stop();
      throw e;
    } finally {
      live.early = undefined;
    }
    return live;
  }

  /** The table now, without waiting (what a request already under way keeps using). */
  get now(): IngressTable {
    return this.state.table;
  }

  /**
   * The table for a new request: the one in use, at once. A write on this instance is applied
   * before its API answer goes out (changed() settles then), so no request waits for it.
   */
  current(): IngressTable {
    return this.state.table;
  }

  /**
   * A write committed on this instance: apply the rows it touched (`ids`; none: nothing the
   * table holds; undefined: unknown, reload whole), and tell the other instances.
   */
  changed(written?: readonly string[]): Promise<void> {
    const ids = written?.filter(isTableId);
    if (ids && ids.length === 0) return Promise.resolve();
    const applied = this.reload(ids);
    if (this.ctx.db.provider === 'postgresql') {
      let payload = this.instanceId;
      if (ids && payload.length + 1 + ids.join(',').length <= MAX_PAYLOAD) payload += ` ${ids.join(',')}`;
      void this.ctx.db.prisma.$executeRawUnsafe('SELECT pg_notify($1, $2)', CHANNEL, payload).catch((e) => this.log({ level: 'warn', msg: `ingress: telling other instances of a change failed: ${(e as Error).message}` }));
    }
    return applied;
  }

  /** Applies these rows again, settling once they are (undefined: everything, in the background, settling at once). */
  reload(ids?: readonly string[]): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.early) {
      if (!ids) this.early.whole = true;
      else for (const id of ids) this.early.ids.add(id);
      return Promise.resolve();
    }
    if (!ids || ids.length > MAX_IDS) {
      this.wholeWanted = true;
      this.reloading ??= this.reloadLoop().finally(() => { this.reloading = undefined; });
      return Promise.resolve();
    }
    for (const id of ids) this.pending.add(id);
    this.applying ??= this.applyLoop().finally(() => { this.applying = undefined; });
    return this.applying;
  }

  private async applyLoop() {
    while (this.pending.size && !this.stopped) {
      const ids = [...this.pending];
      this.pending.clear();
      if (this.sinceReload) for (const id of ids) this.sinceReload.add(id);
      try {
        await this.applyIds(this.state, ids);
      } catch (e) {
        for (const id of ids) this.pending.add(id);
        this.log({ level: 'warn', msg: `ingress: reading a change for the routing table failed (the previous table stays in use; retrying in ${RETRY_MS} ms): ${(e as Error).message}` });
        clearTimeout(this.retry);
        this.retry = setTimeout(() => this.reload([]), RETRY_MS);
        return;
      }
    }
  }

  private async applyIds(state: TableState, ids: string[]) {
    const rows = await loadSnapshot(this.ctx, ids);
    const found = new Set(rows.map((r) => r.id));
    const { rereadPolicies } = state.apply({ rows, gone: ids.filter((id) => !found.has(id)) }, ++this.version);
    for (const policyId of rereadPolicies) await this.rereadPolicy(state, policyId);
  }

  /** A policy read again whole (two of its rule ids share their hashes, so a removal could not tell them apart). */
  private async rereadPolicy(state: TableState, policyId: string) {
    const b = new IpRuleSetBuilder();
    await loadRules(this.ctx, () => b, policyId);
    state.replaceRules(policyId, b.build(), ++this.version);
  }

  private async reloadLoop() {
    while (this.wholeWanted && !this.stopped) {
      this.wholeWanted = false;
      this.sinceReload = new Set();
      try {
        const next = await buildState(this.ctx, this.version + 1, this.log);
        // Changes applied to the table in use while the new one was read are applied to it too.
        for (;;) {
          while (this.applying) await this.applying;
          const again = [...this.sinceReload, ...this.pending];
          this.sinceReload.clear();
          this.pending.clear();
          if (!again.length) break;
          await this.applyIds(next, again);
        }
        this.version = Math.max(this.version, next.table.version) + 1;
        next.table = { ...next.table, version: this.version };
        this.state = next;
      } catch (e) {
        this.log({ level: 'warn', msg: `ingress: reloading the routing table failed (the previous one stays in use; retrying in ${RETRY_MS} ms): ${(e as Error).message}` });
        clearTimeout(this.retry);
        this.retry = setTimeout(() => this.reload(), RETRY_MS);
        return;
      } finally {
        this.sinceReload = undefined;
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
      const [from, ids] = String(n.payload ?? '').split(' ');
      if (from === this.instanceId) return;
      this.reload(ids ? ids.split(',') : undefined);
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
    await this.applying;
    await this.reloading;
  }
}
