// Runs a plan's operations: each when the operations it waits for have finished, at most
// `parallelism` requests at once (the client's limiter and 429 handling are shared by all).
// Writes that are ready together go in batches of up to 100 (POST /_edgeform/batch, each
// operation answered on its own): the server counts a batch one request per 10 operations
// against its per-key rate limit, so 5,000 writes fit in the default minute's allowance
// where one request each waited 530 s. A server without batches gets one request each. A
// failure stops only what depends on it; independent work carries on, and because
// identity lives on the server (stamps, natural keys), running apply again finishes the job.
import fs from 'node:fs';
import path from 'node:path';
import { ApiClientError, BATCH_MAX_OPERATIONS, NO_SUCH_PATH, type ApiClient, type BatchOperation, type BatchResult } from '../../provider/client/index.js';
import { kindOf, shapeOf, type KindEntry } from '../../provider/catalog/index.js';
import { mapRefs } from '../../provider/catalog/walk.js';
import { onceFields, parseRef } from '../manifest/kinds.js';
import { isNoop, type Change, type Operation, type Plan } from '../plan/types.js';
import { createOnce, findCreated, outcomeUnknown } from './uncertain.js';

type Doc = Record<string, any>;

export interface Failure {
  address: string;
  operation: Operation;
  message: string;
  status?: number;
  errorCode?: string;
  operationId?: string;
}

export type ProgressEvent =
  | { type: 'start'; change: Change }
  | { type: 'done'; change: Change; seconds: number; id?: string; tokenFile?: string }
  | { type: 'failed'; change: Change; failure: Failure }
  | { type: 'skipped'; change: Change; because: string }
  /** A change that started `seconds` ago and is not over yet (every `stillEvery` ms). */
  | { type: 'still'; change: Change; seconds: number };

export interface ExecuteResult {
  failures: Failure[];
  /** Changes not attempted because something they depend on failed. */
  skipped: string[];
  /** Changes carried out in full. */
  done: Change[];
  /** Set when the run was stopped (`signal`): the changes neither done, failed nor skipped, by address. */
  notDone?: string[];
}

class Unresolved extends Error {}

export interface ExecuteOptions {
  parallelism: number;
  onProgress?: (e: ProgressEvent) => void;
  /** How often a change still running is reported (ms; default 10 s): a wait on the rate limit must not look like a hang. */
  stillEvery?: number;
  /** Aborted: no operation starts any more; those in flight finish, and the result lists what was not done. */
  signal?: AbortSignal;
  /** Writes ready together are sent in batches of up to this many (default 100; 1: one request each). */
  batchSize?: number;
}

/** A batch's JSON at most (the server takes bodies up to 1 MiB). */
const BATCH_BYTES = 512 * 1024;

export async function execute(client: ApiClient, plan: Plan, opts: ExecuteOptions): Promise<ExecuteResult> {
  const ops = plan.operations;
  const changeOf = new Map<string, Change>(plan.changes.map((c) => [c.address, c]));
  const remaining = new Map<string, number>(plan.changes.map((c) => [c.address, c.operations.length]));
  // An operation carries out part of its own change and, for a parent's delete, of each child it takes along.
  const changesOf = new Map<number, Change[]>();
  for (const c of plan.changes) for (const i of c.operations) changesOf.set(i, [...(changesOf.get(i) ?? []), c]);
  const startedAt = new Map<string, number>();
  const ids = new Map<string, string>();
  const createdId = new Map<string, string>();
  const waiting = new Map<number, number>(ops.map((o) => [o.index, o.after.length]));
  const dependents = new Map<number, number[]>();
  for (const o of ops) for (const a of o.after) dependents.set(a, [...(dependents.get(a) ?? []), o.index]);
  const failures: Failure[] = [];
  const skipped = new Set<string>();
  const blocked = new Set<number>();
  const done: Change[] = [];
  /** Changes that started and are over (done or failed). */
  const ended = new Set<string>();
  // Ids the plan knows already: a create whose outcome is unknown never takes one of them for its own.
  const known = new Set<string>(plan.changes.flatMap((c) => (c.id ? [c.id] : [])));

  const stopped = () => opts.signal?.aborted === true;

  const resolve = (v: string | undefined) => {
    if (v === undefined || !parseRef(v)) return v;
    const id = ids.get(v);
    if (!id) throw new Unresolved(`${v} has no id: it was not created`);
    return id;
  };

  /** Carries out one operation with requests of its own; `unsure`: a create sent before whose outcome is unknown (looked for first). */
  const run = async (o: Operation, unsure = false): Promise<void> => {
    const kind = kindOf(o.kind);
    const id = resolve(o.id);
    const parent = resolve(o.parent);
    const pathParent = kind.parent?.in === 'path' ? parent : undefined;
    switch (o.method) {
      case 'create': {
        const body = mapRefs(kind.fields, o.body ?? {}, (v) => resolve(v)!);
        if (kind.parent?.in === 'body' && parent) body[kind.parent.field] = parent;
        const already = unsure ? await findCreated(client, kind, body, parent, known) : undefined;
        let { made, found } = already ? { made: already, found: true } : await createOnce(client, kind, body, pathParent, parent, known);
        // Made, but its once-returned token went with the lost response: of no use, so made anew.
        if (found && o.tokenFile && onceFields(kind).length) {
          await client.delete(kind, made.id, pathParent);
          ({ made } = await createOnce(client, kind, body, pathParent, parent, new Set([...known, made.id])));
        }
        if (o.tokenFile) await writeOnce(client, o.tokenFile, kind, made, pathParent);
        if (o.assigns) ids.set(o.assigns, made.id);
        createdId.set(o.address, made.id);
        return;
      }
      case 'update':
        await client.update(kind, id!, mapRefs(kind.fields, o.body ?? {}, (v) => resolve(v)!), pathParent);
        return;
      case 'put_module': {
        const shape = shapeOf(kind.modules[o.module!].schema) ?? {};
        await client.putModule(kind, o.module!, id!, mapRefs(shape, o.body ?? {}, (v) => resolve(v)!), pathParent);
        return;
      }
      case 'delete_module':
        await client.deleteModule(kind, o.module!, id!, pathParent);
        return;
      case 'delete':
        // Already gone (deleted by hand, or taken with its parent) counts as deleted.
        await client.delete(kind, id!, pathParent);
        return;
    }
  };

  /**
   * One operation as a batch's operation: the request it stands for, and what its answer
   * does (a create's id recorded, its token written). Resolving a reference may throw.
   */
  const asBatched = (o: Operation): { op: BatchOperation; finish(r: BatchResult): Promise<void> } => {
    const kind = kindOf(o.kind);
    const id = resolve(o.id);
    const parent = resolve(o.parent);
    const pathParent = kind.parent?.in === 'path' ? parent : undefined;
    const ok = async () => {};
    switch (o.method) {
      case 'create': {
        const body = mapRefs(kind.fields, o.body ?? {}, (v) => resolve(v)!);
        if (kind.parent?.in === 'body' && parent) body[kind.parent.field] = parent;
        return {
          op: { method: 'POST', path: client.collection(kind, pathParent), body },
          finish: async (r) => {
            const made = r.body!;
            if (o.tokenFile) await writeOnce(client, o.tokenFile, kind, made, pathParent);
            if (o.assigns) ids.set(o.assigns, made.id);
            createdId.set(o.address, made.id);
          },
        };
      }
      case 'update':
        return { op: { method: 'PATCH', path: client.item(kind, id!, pathParent), body: mapRefs(kind.fields, o.body ?? {}, (v) => resolve(v)!) }, finish: ok };
      case 'put_module': {
        const shape = shapeOf(kind.modules[o.module!].schema) ?? {};
        return { op: { method: 'PUT', path: `${client.item(kind, id!, pathParent)}/${o.module}`, body: mapRefs(shape, o.body ?? {}, (v) => resolve(v)!) }, finish: ok };
      }
      case 'delete_module':
        return { op: { method: 'DELETE', path: `${client.item(kind, id!, pathParent)}/${o.module}` }, finish: ok };
      case 'delete':
        return { op: { method: 'DELETE', path: client.item(kind, id!, pathParent) }, finish: ok };
    }
  };

  let batchSize = Math.max(1, Math.min(opts.batchSize ?? BATCH_MAX_OPERATIONS, BATCH_MAX_OPERATIONS));

  /**
   * Carries out several operations in one batch. Each settles through `settle` as its answer
   * comes; one the batch cannot answer for sure is carried out alone instead: when the batch
   * itself failed (its outcome unknown: a create is looked for before it is sent again), or
   * when its own answer is a server fault or a 429.
   */
  const runBatch = async (indices: number[], settle: (i: number, error?: unknown) => void): Promise<number[]> => {
    const prepared: { i: number; op: BatchOperation; finish(r: BatchResult): Promise<void> }[] = [];
    for (const i of indices) {
      try {
        prepared.push({ i, ...asBatched(ops[i]) });
      } catch (e) {
        settle(i, e);
      }
    }
    if (!prepared.length) return [];
    let results: BatchResult[];
    try {
      results = await client.batch(prepared.map((p) => p.op));
    } catch (e) {
      // Nothing of it ran: sent again, in smaller batches or one request each.
      if (e instanceof ApiClientError && e.code === 'ERR_SERVICE_229') {
        // Heavier than the server's whole rate-limit window (a batch counts one request per 10 operations).
        const limit = Number(e.details.limit);
        batchSize = Math.max(1, Math.min(Math.floor(batchSize / 2), Number.isFinite(limit) ? limit * 10 : 1));
        return prepared.map((p) => p.i);
      }
      if (e instanceof ApiClientError && ((e.status === 404 && e.code === NO_SUCH_PATH) || e.status === 405)) {
        // A server without batches: one request each from now on.
        batchSize = 1;
        return prepared.map((p) => p.i);
      }
      // Sent, and not answered (or answered by a fault): what each operation did is not known.
      const unsure = outcomeUnknown(e) || (e instanceof ApiClientError && e.status >= 500);
      await Promise.all(prepared.map((p) => run(ops[p.i], unsure && ops[p.i].method === 'create').then(() => settle(p.i), (err: unknown) => settle(p.i, err))));
      return [];
    }
    await Promise.all(prepared.map(async (p, k) => {
      const r = results[k];
      if (r.status < 300) {
        await p.finish(r).then(() => settle(p.i), (err: unknown) => settle(p.i, err));
        return;
      }
      const error = client.operationError(p.op, r);
      // Already gone (deleted by hand, or taken with its parent) counts as deleted, as alone.
      if (p.op.method === 'DELETE' && error.notFound()) return settle(p.i);
      if (error.retryable() || outcomeUnknown(error)) {
        await run(ops[p.i], ops[p.i].method === 'create' && outcomeUnknown(error)).then(() => settle(p.i), (err: unknown) => settle(p.i, err));
        return;
      }
      settle(p.i, error);
    }));
    return [];
  };

  const block = (index: number, because: string) => {
    const stack = [index];
    while (stack.length) {
      const i = stack.pop()!;
      for (const d of dependents.get(i) ?? []) {
        if (blocked.has(d)) continue;
        blocked.add(d);
        const address = ops[d].address;
        if (!skipped.has(address)) {
          skipped.add(address);
          const change = changeOf.get(address);
          if (change) opts.onProgress?.({ type: 'skipped', change, because });
        }
        stack.push(d);
      }
    }
  };

  const onProgress = opts.onProgress;
  const ticker = onProgress
    ? setInterval(() => {
        const now = Date.now();
        for (const [address, at] of startedAt) if (!ended.has(address)) onProgress({ type: 'still', change: changeOf.get(address)!, seconds: (now - at) / 1000 });
      }, opts.stillEvery ?? 10_000)
    : undefined;
  await new Promise<void>((finish) => {
    const ready = ops.filter((o) => o.after.length === 0).map((o) => o.index);
    let running = 0;
    let settled = 0;
    const total = ops.length;
    if (total === 0) return finish();
    const over = new Set<number>();
    /** One request (or batch) is over: more may start. */
    const unitDone = () => {
      running--;
      pump();
      if (settled === total || (stopped() && running === 0)) finish();
      else stuck();
    };
    opts.signal?.addEventListener('abort', () => {
      if (running === 0) finish();
    });
    // Nothing runs and nothing can start, yet operations are left: they wait on each other.
    // The planner never orders a cycle; if it ever did, report it rather than wait forever.
    const stuck = () => {
      if (running > 0 || ready.length > 0) return;
      for (const o of ops) {
        if (over.has(o.index) || blocked.has(o.index)) continue;
        failures.push({ address: o.address, operation: o, message: 'not attempted: it waits, through other operations, for itself (a cycle in the plan); nothing was sent for it' });
      }
      finish();
    };
    /** Operation i is over (run, failed or skipped): what waited only for it may start. */
    const release = (i: number) => {
      for (const d of dependents.get(i) ?? []) {
        const n = waiting.get(d)! - 1;
        waiting.set(d, n);
        if (n === 0) ready.push(d);
      }
    };
    /** Reports operation i's start, for each change it carries. */
    const begin = (i: number) => {
      const o = ops[i];
      const change = changeOf.get(o.address);
      for (const c of changesOf.get(i) ?? (change ? [change] : [])) {
        if (startedAt.has(c.address)) continue;
        startedAt.set(c.address, Date.now());
        opts.onProgress?.({ type: 'start', change: c });
      }
    };
    /** Operation i is done (no error) or failed: its changes reported, its dependents released or blocked. */
    const settle = (i: number, error?: unknown) => {
      if (over.has(i)) return;
      const o = ops[i];
      const change = changeOf.get(o.address);
      const carried = changesOf.get(i) ?? (change ? [change] : []);
      if (error === undefined) {
        for (const c of carried) {
          const left = (remaining.get(c.address) ?? 1) - 1;
          remaining.set(c.address, left);
          if (left > 0) continue;
          done.push(c);
          ended.add(c.address);
          const tokenFile = createdId.has(c.address) ? c.tokenFile : undefined;
          opts.onProgress?.({ type: 'done', change: c, seconds: (Date.now() - startedAt.get(c.address)!) / 1000, id: createdId.get(c.address) ?? c.id, tokenFile });
        }
      } else {
        const failure = failureOf(o, error);
        failures.push(failure);
        for (const c of carried) ended.add(c.address);
        if (change) opts.onProgress?.({ type: 'failed', change, failure });
        block(i, o.address);
      }
      release(i);
      over.add(i);
      settled++;
    };
    const pump = () => {
      while (!stopped() && running < opts.parallelism && ready.length) {
        const i = ready.shift()!;
        if (blocked.has(i)) {
          // Skipped, but settled like any other, so that its own dependents settle too.
          running++;
          release(i);
          queueMicrotask(() => {
            over.add(i);
            settled++;
            unitDone();
          });
          continue;
        }
        running++;
        if (batchSize > 1) {
          // This operation and the others ready now that are not skipped, up to a batch.
          const batch = [i];
          let bytes = JSON.stringify(ops[i].body ?? null).length;
          for (let k = 0; k < ready.length && batch.length < batchSize && bytes < BATCH_BYTES;) {
            const j = ready[k];
            if (blocked.has(j)) { k++; continue; }
            ready.splice(k, 1);
            batch.push(j);
            bytes += JSON.stringify(ops[j].body ?? null).length;
          }
          for (const j of batch) begin(j);
          if (batch.length > 1) {
            runBatch(batch, settle)
              .then((again) => { ready.unshift(...again); }, (e: unknown) => { for (const j of batch) settle(j, e); })
              .finally(unitDone);
            continue;
          }
        } else begin(i);
        run(ops[i])
          .then(() => settle(i), (e: unknown) => settle(i, e))
          .finally(unitDone);
      }
    };
    pump();
    // Stopped before anything started (the lock lost while planning): nothing will complete to say so.
    if (stopped() && running === 0) finish();
    else stuck();
  }).finally(() => clearInterval(ticker));
  if (!stopped()) return { failures, skipped: [...skipped], done };
  const doneAt = new Set(done.map((c) => c.address));
  const notDone = plan.changes.filter((c) => !isNoop(c) && !doneAt.has(c.address) && !ended.has(c.address) && !skipped.has(c.address)).map((c) => c.address);
  return { failures, skipped: [...skipped], done, notDone };
}

function failureOf(o: Operation, e: unknown): Failure {
  if (e instanceof ApiClientError) {
    // The server's sentence alone: status, code and operation id are fields of their own.
    return { address: o.address, operation: o, message: e.serverMessage, status: e.status, errorCode: e.code, operationId: e.operationId };
  }
  return { address: o.address, operation: o, message: (e as Error).message };
}

export type { Doc };

/**
 * Writes what the server returns only once (an API key's token) to the document's
 * token_file, readable by its owner alone; without it the value is lost with the response.
 * A resource whose token could not be kept is of no use: it is deleted again, and the
 * failure says why, so that the next apply creates it anew.
 */
async function writeOnce(client: ApiClient, file: string, kind: KindEntry, made: Record<string, any>, pathParent: string | undefined) {
  const fields = onceFields(kind);
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const temp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(temp, `${fields.map((f) => made[f]).join('\n')}\n`, { mode: 0o600 });
    fs.renameSync(temp, file);
  } catch (e) {
    await client.delete(kind, made.id, pathParent);
    throw new Error(`its ${fields.join(', ')} could not be written to ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}), and the server returns it only once: ${made.id} was deleted again; fix token_file and apply again`);
  }
}
