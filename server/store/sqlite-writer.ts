// The SQLite write connection: one connection, one writer at a time. Prisma's better-sqlite3
// adapter runs every query on a single connection and queues only transactions, so a query
// sent outside a transaction while one is open ran inside it: a read saw rows that were
// then rolled back, and a write (the delivery worker's) was rolled back with someone
// else's failure. Here every statement outside a transaction waits for the open one to
// end, and each transaction takes SQLite's write lock before its first read (as BEGIN
// IMMEDIATE would), waiting up to the busy timeout for another process's writer instead of
// failing with SQLITE_BUSY halfway through. Reads that need not wait use the read
// connection (db.ts). The engine's own write transactions (hot-writes-sqlite.ts) run on the
// same connection and take their turn in the same queue (SqliteWriter).
import type { IsolationLevel, SqlDriverAdapter, SqlDriverAdapterFactory, SqlQuery, Transaction } from '@prisma/driver-adapter-utils';

/** A FIFO lock: `run` calls wait for each other, in arrival order. */
export class Queue {
  private tail: Promise<void> = Promise.resolve();
  /** Holders and waiters not yet released. */
  private entered = 0;

  /** Resolves once every earlier holder has released; returns the release function. */
  acquire(): Promise<() => void> {
    const before = this.tail;
    const release = this.enter();
    return before.then(() => release);
  }

  /** The release function at once if nobody holds or waits, else undefined (then call acquire). */
  tryAcquire(): (() => void) | undefined {
    return this.entered === 0 ? this.enter() : undefined;
  }

  private enter(): () => void {
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    this.tail = this.tail.then(() => held);
    this.entered++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.entered--;
      release();
    };
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/**
 * A no-op write: in a deferred transaction that has read nothing yet it takes the write
 * lock, honouring busy_timeout, so the transaction is serializable from its first statement.
 */
const TAKE_WRITE_LOCK: SqlQuery = { sql: 'DELETE FROM "Setting" WHERE 0', args: [], argTypes: [] };

/** A script the writer runs after every `every` committed transactions, in turn with the writes. */
export interface Upkeep { every: number; script: string }

/** The write connection's turn-taking and upkeep, shared by Prisma's adapter and the engine's transactions. */
export class SqliteWriter {
  readonly queue = new Queue();
  private commits = 0;

  constructor(private readonly upkeep?: Upkeep) {}

  /** Counts a committed transaction; every `upkeep.every`-th runs the upkeep script through `run` (in turn). */
  committed(run: (script: string) => Promise<unknown>) {
    if (!this.upkeep || ++this.commits % this.upkeep.every !== 0) return;
    // Failing upkeep fails no write; the next round tries again.
    void run(this.upkeep.script).catch(() => {});
  }
}

class SerializedAdapter implements SqlDriverAdapter {
  readonly provider;
  readonly adapterName;
  private readonly queue: Queue;

  constructor(private readonly inner: SqlDriverAdapter, private readonly writer: SqliteWriter) {
    this.queue = writer.queue;
    this.provider = inner.provider;
    this.adapterName = inner.adapterName;
  }

  queryRaw(q: SqlQuery) {
    return this.queue.run(() => this.inner.queryRaw(q));
  }

  executeRaw(q: SqlQuery) {
    return this.queue.run(() => this.inner.executeRaw(q));
  }

  executeScript(script: string) {
    return this.queue.run(() => this.inner.executeScript(script));
  }

  async startTransaction(isolationLevel?: IsolationLevel): Promise<Transaction> {
    const release = await this.queue.acquire();
    let tx: Transaction | undefined;
    try {
      tx = await this.inner.startTransaction(isolationLevel);
      await tx.executeRaw(TAKE_WRITE_LOCK);
    } catch (e) {
      // Prisma sends COMMIT/ROLLBACK itself; a transaction it never received is ended here.
      if (tx) await tx.executeRaw({ sql: 'ROLLBACK', args: [], argTypes: [] }).catch(() => {});
      await tx?.rollback().catch(() => {});
      release();
      throw e;
    }
    // Prisma calls commit()/rollback() after sending COMMIT/ROLLBACK: then the next may go.
    const { commit, rollback } = tx;
    return Object.assign(tx, {
      commit: () => commit.call(tx).finally(release).then(() => this.committed()),
      rollback: () => rollback.call(tx).finally(release),
    });
  }

  private committed() {
    this.writer.committed((script) => this.executeScript(script));
  }

  getConnectionInfo() {
    return this.inner.getConnectionInfo?.() ?? { supportsRelationJoins: false };
  }

  dispose() {
    return this.queue.run(() => this.inner.dispose());
  }
}

/** Wraps a driver adapter factory so its connection admits one writer at a time. */
export function serializedWriter(factory: SqlDriverAdapterFactory, writer: SqliteWriter): SqlDriverAdapterFactory {
  return {
    provider: factory.provider,
    adapterName: factory.adapterName,
    connect: async () => new SerializedAdapter(await factory.connect(), writer),
  };
}
