// The generic resource engine: create, read, list, update, module put/delete and delete
// for every catalog kind. Kind names never appear here; traits and behaviours decide.
import { catalog, kindOf, kindOfId, type KindEntry } from '../../provider/catalog/index.js';
import { traitsOf, type Traits } from '../../provider/catalog/traits.js';
import { collectRefs, mergeSecrets, refTraitsOf, splitSecrets, toReadFields } from '../../provider/catalog/walk.js';
import { ApiError, notFound } from '../http/errors.js';
import { parseInput } from '../http/validation.js';
import { newId } from '../store/ids.js';
import type { RefRow, Rows, Writes } from '../store/hot-writes.js';
import type { ResourceRow } from '../store/hot-reads.js';
import type { LockMode } from '../store/locks.js';
import { failAfterInsertForTests } from '../store/test-hooks.js';
import { emit, readSubscriptionsEarly, readTime, rfc3339 } from '../events/outbox.js';
import { behaviourOf, type Doc, type StoredResource } from './behaviours.js';
import { holdCaller } from './caller-hold.js';
import type { Ctx, ServerContext } from './context.js';

/** A stored row as the engine reads it (the hot reads' ResourceRow; Prisma's rows have the same fields). */
export type Row = ResourceRow;

/** Attempts of a write transaction that PostgreSQL aborted as a deadlock victim. */
const ATTEMPTS = 5;

export { rfc3339 };

/** A human name for a kind in messages: "IP policy", "HTTPS edge route". */
export const label = (kind: KindEntry) => kind.type.replace(/_/g, ' ').replace(/\b(ip|https|tcp|tls|ssh|api|http)\b/g, (w) => w.toUpperCase());

/**
 * The stored form of a row. Write-only values are unsealed only when something asks for
 * them (a write that re-validates the whole document, a worker that sends with them):
 * reads, lists and deletes never do, so they work whatever state the sealed value is in.
 */
export function toStored(ctx: ServerContext, row: Row): StoredResource {
  return new Stored(ctx, row);
}

// A class, not an object literal with getters: each literal's getters were closures of their
// own, so every stored resource read got a map of its own, and an old-space map holding a
// request's closures kept them (and what they reached) alive through the young-generation
// collections (bench/README.md, "GET one below 85 µs").
class Stored implements StoredResource {
  readonly id: string;
  readonly kind: string;
  readonly parentId: string | null;
  readonly createdText: string | undefined;
  readonly body: Doc;
  readonly computed: Doc;
  readonly #ctx: ServerContext;
  readonly #sealed: string | null;
  /** A row read with Dates (Prisma's) keeps its Date; a TextRow's is made when asked for. */
  readonly #createdAt: Date | undefined;
  #opened?: { fields: Record<string, unknown>; internal: Doc };

  constructor(ctx: ServerContext, row: Row) {
    const data = row.data as { body: Doc; computed: Doc };
    this.id = row.id;
    this.kind = row.kind;
    this.parentId = row.parentId;
    this.createdText = row.createdText;
    this.#createdAt = row.createdText === undefined ? row.createdAt : undefined;
    this.body = data.body;
    this.computed = data.computed;
    this.#ctx = ctx;
    this.#sealed = row.sealed;
  }

  get createdAt() { return this.#createdAt ?? new Date(this.createdText!); }
  get secretFields() { return this.#open().fields; }
  get internal() { return this.#open().internal; }

  #open() {
    return (this.#opened ??= this.#sealed ? JSON.parse(this.#ctx.box.open(this.#sealed)) : { fields: {}, internal: {} });
  }
}

/** The absolute uri of a resource. */
export function uriOf(ctx: Pick<Ctx, 'publicUrl'>, kind: KindEntry, id: string, parentId?: string | null): string {
  const path = kind.parent?.in === 'path' ? kind.path.replace(`{${kind.parent.field}}`, parentId ?? '') : kind.path;
  return `${ctx.publicUrl}${path}/${id}`;
}

/** The `uri` of referenced resources in read forms, one per public URL (a server has one): made per read, it was garbage on every GET. */
const refsByUrl = new Map<string, { uriOf: (id: string) => string }>();
function refsOf(ctx: Ctx) {
  let refs = refsByUrl.get(ctx.publicUrl);
  if (!refs) {
    const server = { publicUrl: ctx.publicUrl };
    refs = {
      uriOf: (id: string) => {
        const kind = kindOfId(id);
        return kind ? uriOf(server, kind, id) : '';
      },
    };
    refsByUrl.set(server.publicUrl, refs);
  }
  return refs;
}

/** What shaping a kind's read form needs, worked out once per kind (a GET did it per request). */
interface ShapePlan {
  /** The read form's keys in order. */
  keys: string[];
  /** Kinds embedded in this one's read form. */
  children: KindEntry[];
  /** The path parameter naming the parent, shown in the read form. */
  parentField?: string;
  /** The kind's path with its parent left to fill in, split around the parent's place. */
  pathParts: [string, string];
}

const plans = new WeakMap<KindEntry, ShapePlan>();
function planOf(kind: KindEntry): ShapePlan {
  let plan = plans.get(kind);
  if (!plan) {
    const inPath = kind.parent?.in === 'path' ? kind.parent.field : undefined;
    const at = inPath ? kind.path.indexOf(`{${inPath}}`) : -1;
    plan = {
      keys: Object.keys(kind.read.shape),
      children: catalog.filter((k) => k.parent?.kind === kind.kind && k.parent.embedded),
      parentField: inPath,
      pathParts: at < 0 ? [kind.path, ''] : [kind.path.slice(0, at), kind.path.slice(at + inPath!.length + 2)],
    };
    plans.set(kind, plan);
  }
  return plan;
}

/**
 * Shapes stored resources into their read forms (embedding children where the catalog says).
 * `db`: what they are read from, the hot reads outside a write (ctx.db.hot), the transaction inside one.
 */
export async function present(ctx: Ctx, db: Rows, kind: KindEntry, rows: StoredResource[], extra?: Doc): Promise<Doc[]> {
  const plan = planOf(kind);
  const embedded: [string, Map<string, Doc[]>][] = [];
  for (const child of plan.children) {
    const childRows = rows.length ? await db.children(child.kind, rows.map((r) => r.id)) : [];
    const stored = childRows.map((r) => toStored(ctx, r));
    const shaped = await present(ctx, db, child, stored);
    const byParent = new Map<string, Doc[]>();
    for (let i = 0; i < stored.length; i++) {
      const list = byParent.get(stored[i].parentId!);
      if (list) list.push(shaped[i]);
      else byParent.set(stored[i].parentId!, [shaped[i]]);
    }
    embedded.push([child.parent!.nestAs, byParent]);
  }
  const b = behaviourOf(kind.kind);
  const refs = refsOf(ctx);
  const base = `${ctx.publicUrl}${plan.pathParts[0]}`;
  const hasExtra = extra !== undefined && Object.keys(extra).length > 0;
  const out: Doc[] = [];
  for (const row of rows) {
    // Later sources win, as they always have: the body's fields, then computed ones, embedded children, extra.
    const values = toReadFields(kind.fields, row.body, refs);
    if (!('id' in values)) values.id = row.id;
    if (!('uri' in values)) values.uri = plan.parentField ? `${base}${row.parentId ?? ''}${plan.pathParts[1]}/${row.id}` : `${base}/${row.id}`;
    if (!('created_at' in values)) values.created_at = row.createdText === undefined ? rfc3339(row.createdAt) : readTime(row.createdText);
    if (plan.parentField && !(plan.parentField in values)) values[plan.parentField] = row.parentId;
    Object.assign(values, row.computed);
    for (const [k, m] of embedded) values[k] = m.get(row.id) ?? [];
    if (hasExtra) Object.assign(values, extra);
    if (b.read) await b.read({ kind, row, out: values, ctx, rows: db });
    const shaped: Doc = {};
    for (const k of plan.keys) {
      const v = values[k];
      if (!(kind.spec.omitUnset && v == null)) shaped[k] = v === undefined ? null : v;
    }
    out.push(shaped);
  }
  return out;
}

/** A stored resource by id with its write-only values opened, or undefined (for server-side workers). */
export async function findStored(ctx: ServerContext, id: string): Promise<StoredResource | undefined> {
  const row = await ctx.db.hot.resource(id);
  return row ? toStored(ctx, row) : undefined;
}

function checked(ctx: Ctx, kind: KindEntry, id: string, parentId: string | undefined, row: Row | undefined): StoredResource {
  if (!row || row.kind !== kind.kind || (parentId !== undefined && row.parentId !== parentId)) throw notFound(label(kind), id);
  return toStored(ctx, row);
}

/** What a kind's writes look for, worked out once per kind (a PATCH walked the schema's traits four times). */
interface WritePlan {
  /** Whether a document of the kind can hold a reference at all. */
  refs: boolean;
  /** The fields whose values are unique keys. */
  unique: [string, NonNullable<Traits['unique']>][];
}

const writePlans = new WeakMap<KindEntry, WritePlan>();
function writePlanOf(kind: KindEntry): WritePlan {
  let plan = writePlans.get(kind);
  if (!plan) {
    plan = {
      refs: refTraitsOf(kind.fields).length > 0,
      unique: Object.entries(kind.fields).flatMap(([field, schema]) => {
        const u = traitsOf(schema).unique;
        return u ? [[field, u] as [string, NonNullable<Traits['unique']>]] : [];
      }),
    };
    writePlans.set(kind, plan);
  }
  return plan;
}

/** The references in a document of `kind`. */
const refsIn = (kind: KindEntry, body: Doc) => (writePlanOf(kind).refs ? collectRefs(kind.fields, body) : []);

/** A resource in a write transaction, its row locked first; 404 if missing. */
async function loadLocked(ctx: Ctx, w: Writes, kind: KindEntry, id: string, parentId: string | undefined, lock: LockMode): Promise<StoredResource> {
  const [row] = await w.lock([id], lock);
  return checked(ctx, kind, id, parentId, row);
}

/** The parent id of a new child, checked to exist and locked so it keeps existing until the commit. */
async function resolveParent(w: Writes, kind: KindEntry, body: Doc, pathParams: Record<string, string>): Promise<string | null> {
  const parent = kind.parent;
  if (!parent) return null;
  const parentKind = kindOf(parent.kind);
  const parentId = parent.in === 'path' ? pathParams[parent.field] : body[parent.field];
  const [row] = parentId ? await w.lock([parentId], 'KEY SHARE') : [];
  if (!row || row.kind !== parent.kind) {
    if (parent.in === 'path') throw notFound(label(parentKind), parentId);
    throw new ApiError('ERR_SERVICE_107', `${parent.field}: ${label(parentKind)} ${parentId} does not exist`, { field: parent.field, id: parentId });
  }
  return parentId;
}

/**
 * Checks that every reference names an existing resource of an allowed kind, locking each
 * new target so that it cannot be deleted before this transaction commits (and one that
 * was deleted meanwhile is reported missing). Targets of acyclic references are locked
 * against change too, for the cycle check.
 */
async function checkRefs(w: Writes, kind: KindEntry, body: Doc, prior?: StoredResource) {
  const known = new Set(prior ? refsIn(kind, prior.body).flatMap((r) => r.ids) : []);
  for (const found of refsIn(kind, body)) {
    if (found.path === kind.parent?.field) continue;
    const ids = [...new Set(found.ids)].filter((id) => !known.has(id));
    if (!ids.length) continue;
    const rows = await w.lock(ids, found.ref.acyclic ? 'SHARE' : 'KEY SHARE');
    for (const id of ids) {
      const row = rows.find((r) => r.id === id);
      if (!row || !found.ref.to.includes(row.kind)) {
        throw new ApiError('ERR_SERVICE_107', `${found.path}: ${found.ref.to.map((k) => label(kindOf(k))).join(' or ')} ${id} does not exist`, { field: found.path, id });
      }
    }
  }
  // Only an existing resource can be reached from what it references.
  if (prior) {
    for (const found of refsIn(kind, body).filter((r) => r.ref.acyclic)) {
      const cycle = await cycleBack(w, prior.id, found.path, found.ids);
      if (cycle) {
        const reason = `would make a cycle: ${cycle.join(' -> ')}; a ${label(kind)} may not contain itself, directly or through others`;
        throw new ApiError('ERR_SERVICE_103', `${found.path}: ${reason}`, { field: found.path, reason });
      }
    }
  }
}

/**
 * The chain from `start` back to itself through references at `path`, if `ids` lead there.
 * Each resource walked is locked against change first: two writers closing one cycle from
 * both ends wait for each other (one is the deadlock victim and retries, then sees the cycle).
 */
async function cycleBack(w: Writes, start: string, path: string, ids: string[]): Promise<string[] | undefined> {
  const via = new Map<string, string>(ids.map((id) => [id, start]));
  let frontier = [...new Set(ids)];
  const chain = (id: string) => {
    const out = [id];
    for (let at = via.get(id)!; at !== start; at = via.get(at)!) out.unshift(at);
    return [start, ...out];
  };
  while (frontier.length) {
    if (frontier.includes(start)) return chain(start);
    await w.lock(frontier, 'SHARE');
    const edges = await w.refsFrom(frontier, path);
    frontier = [];
    for (const e of edges) {
      if (via.has(e.toId) && e.toId !== start) continue;
      via.set(e.toId, e.fromId);
      frontier.push(e.toId);
      if (e.toId === start) return chain(start);
    }
  }
  return undefined;
}

/** The Reference rows a document makes. */
function refRows(kind: KindEntry, id: string, body: Doc): RefRow[] {
  const rows = new Map<string, RefRow>();
  for (const found of refsIn(kind, body)) {
    if (found.path === kind.parent?.field) continue;
    // heldId is the foreign key: every reference but a "keep" one holds its target in place.
    const heldId = (toId: string) => (found.ref.onDelete === 'keep' ? null : toId);
    for (const toId of found.ids) rows.set(`${found.path} ${toId}`, { fromId: id, path: found.path, toId, onDelete: found.ref.onDelete, heldId: heldId(toId) });
  }
  return [...rows.values()];
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Stores the references of `body`. `prior`: the document it replaces (nothing is written when
 * it made the same references, as a PATCH of a description does), or 'fresh' for a new resource.
 */
async function writeRefs(w: Writes, kind: KindEntry, id: string, body: Doc, prior: Doc | 'fresh') {
  const rows = refRows(kind, id, body);
  if (prior !== 'fresh' && sameJson(rows, refRows(kind, id, prior))) return;
  await w.setRefs(id, rows, prior === 'fresh');
}

function uniqueKeys(kind: KindEntry, body: Doc, parentId: string | null) {
  const keys: { scope: string; value: string; what: string; field: string }[] = [];
  for (const [field, u] of writePlanOf(kind).unique) {
    const value = body[field];
    if (value == null) continue;
    const scope = u.perParent ? `${u.scope}:${parentId}` : u.scope;
    for (const v of Array.isArray(value) ? value : [value]) keys.push({ scope, value: u.key ? u.key(String(v)) : String(v), what: u.what, field });
  }
  return keys;
}

/** Takes the unique keys of `body` (409 when another resource holds one); `prior` as for writeRefs. */
async function writeKeys(w: Writes, kind: KindEntry, id: string, body: Doc, parentId: string | null, prior: Doc | 'fresh') {
  const keys = uniqueKeys(kind, body, parentId);
  const fresh = prior === 'fresh';
  if (!fresh && sameJson(keys, uniqueKeys(kind, prior, parentId))) return;
  if (keys.length) {
    const taken = await w.takenKeys(keys, id);
    if (taken.length) {
      const t = taken[0];
      const k = keys.find((x) => x.scope === t.scope && x.value === t.value)!;
      const holder = kindOfId(t.resourceId);
      const where = k.scope.includes(':') ? ` in this ${label(kindOf(kind.parent!.kind))}` : '';
      throw new ApiError('ERR_SERVICE_320', `${k.field}: ${k.what} ${t.value} is already used${where} by ${holder ? `${label(holder)} ` : ''}${t.resourceId}`, {
        field: k.field,
        value: t.value,
        conflicting_id: t.resourceId,
      });
    }
  }
  await w.setKeys(id, keys, fresh);
}

function sealFor(ctx: Ctx, secretFields: Record<string, unknown>, internal: Doc) {
  return Object.keys(secretFields).length || Object.keys(internal).length ? ctx.box.seal(JSON.stringify({ fields: secretFields, internal })) : null;
}

/**
 * One write transaction (docs/api.md, "Concurrency and consistency"). The caller's key is
 * held for its duration, so no write commits after its key was deleted or its bot
 * deactivated. A deadlock victim (PostgreSQL picks one when two transactions lock the same
 * rows in opposite orders) is run again, a few times. A unique-constraint race (two
 * writers, same key) becomes the 409 the check would have given, and a foreign-key
 * refusal (the database's own reference check) the 409 or 400 the engine's would have.
 * Tells the server after each commit (events may wait), and forgets cached callers after
 * a write of a kind that guards them.
 */
async function transact<T>(ctx: Ctx, kind: KindEntry, fn: (w: Writes) => Promise<T>, what: 'write' | 'delete' = 'write'): Promise<T> {
  const store = ctx.db.writes;
  for (let attempt = 1; ; attempt++) {
    let deliveries = false;
    // The rows written, for the ingress to apply alone (live-table.ts).
    const ids = new Set<string>();
    try {
      const out = await store.transaction(async (w) => {
        ids.clear();
        // Only a write that queued deliveries wakes the delivery worker (a pass is two queries).
        let tracked: Writes = {
          ...w,
          insertDeliveries: (rows) => { deliveries ||= rows.length > 0; return w.insertDeliveries(rows); },
          insert: (row) => { ids.add(row.id); return w.insert(row); },
          update: (id, updatedAt, data, sealed) => { ids.add(id); return w.update(id, updatedAt, data, sealed); },
          remove: (id) => { ids.add(id); return w.remove(id); },
        };
        // A delete reads them after its removals anyway.
        if (what === 'write') tracked = readSubscriptionsEarly(tracked, kind);
        // The caller's hold goes first and is checked before the commit, but the write's own
        // statements do not wait for its answer (on PostgreSQL they travel with it); a refused
        // caller is reported ahead of anything the write itself ran into.
        const held = holdCaller(ctx, tracked);
        held.catch(() => {});
        let out: T;
        try {
          out = await fn(tracked);
        } catch (e) {
          await held;
          throw e;
        }
        await held;
        return out;
      });
      // Before the answer goes out: the next request with a deleted key is refused.
      if (behaviourOf(kind.kind).guardsCallers) ctx.callers?.forget();
      await ctx.afterCommit?.({ deliveries, ids: [...ids] });
      return out;
    } catch (e) {
      const failure = store.failure(e);
      if (failure === 'conflict' && attempt < ATTEMPTS) {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
        continue;
      }
      if (failure === 'conflict') throw new ApiError('ERR_SERVICE_503', 'too many concurrent changes to the same resources; retry', {}, { 'Retry-After': '1' });
      // Waited too long for the database (SQLite: the one writer, here or in another process).
      if (failure === 'busy') throw new ApiError('ERR_SERVICE_503', 'the server is busy with other writes; retry', {}, { 'Retry-After': '1' });
      if (failure === 'unique') throw new ApiError('ERR_SERVICE_320', 'a unique value in this request was taken by a concurrent request; retry to see which');
      if (failure === 'reference' && what === 'delete') throw new ApiError('ERR_SERVICE_321', 'the resource was referenced by a concurrent request; remove those references first');
      if (failure === 'reference') throw new ApiError('ERR_SERVICE_107', 'a resource this request refers to was deleted by a concurrent request');
      throw e;
    }
  }
}

/** Path ids may be repeated in a body (generated clients do); equal values are dropped, others refused. */
function dropPathIds(kind: KindEntry, input: unknown, pathParams: Record<string, string>): unknown {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return input;
  const copy: Doc = { ...(input as Doc) };
  const names = ['id', ...(kind.parent?.in === 'path' ? [kind.parent.field] : [])];
  for (const name of names) {
    if (!(name in copy) || pathParams[name] === undefined) continue;
    if (copy[name] !== pathParams[name]) throw new ApiError('ERR_SERVICE_108', `${name}: ${JSON.stringify(copy[name])} differs from the ${name} in the path (${pathParams[name]})`, { field: name });
    delete copy[name];
  }
  return copy;
}

const requireObject = (input: unknown): Doc => {
  if (input === undefined) return {};
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw new ApiError('ERR_SERVICE_100', 'the request body must be a JSON object');
  return input as Doc;
};

export async function createResource(ctx: Ctx, kind: KindEntry, input: unknown, pathParams: Record<string, string> = {}) {
  const parsed = parseInput(kind.create, requireObject(dropPathIds(kind, input, pathParams)));
  const id = newId(kind.prefix);
  const b = behaviourOf(kind.kind);
  // Expensive preparation (key generation) runs before the write transaction opens.
  const prepared = (await b.prepare?.({ kind, id, body: parsed, ctx })) ?? {};
  const body = prepared.body ?? parsed;
  return transact(ctx, kind, async (w) => {
    const parentId = await resolveParent(w, kind, body, pathParams);
    await checkRefs(w, kind, body);
    const [pub, secretFields] = splitSecrets(kind.fields, body);
    const now = new Date();
    await w.insert({
      id, kind: kind.kind, parentId, createdAt: now, updatedAt: now, data: { body: pub, computed: prepared.computed ?? {} }, sealed: sealFor(ctx, secretFields, prepared.internal ?? {}),
    });
    await failAfterInsertForTests(kind.type);
    await writeRefs(w, kind, id, body, 'fresh');
    await writeKeys(w, kind, id, body, parentId, 'fresh');
    const once = (await b.created?.({ kind, id, body, ctx, tx: w })) ?? {};
    const row: StoredResource = { id, kind: kind.kind, parentId, createdAt: now, body: pub, computed: prepared.computed ?? {}, secretFields, internal: prepared.internal ?? {} };
    // A resource made in this transaction has no children to embed yet.
    const [out] = await present(ctx, { ...w, children: async () => [] }, kind, [row]);
    await emit(w, kind, 'created', out);
    return { ...out, ...once };
  });
}

export async function getResource(ctx: Ctx, kind: KindEntry, id: string, parentId?: string) {
  const db = ctx.db.hot;
  const stored = checked(ctx, kind, id, parentId, await db.resource(id));
  return (await present(ctx, db, kind, [stored]))[0];
}

export async function listResources(ctx: Ctx, kind: KindEntry, limit: number, beforeId?: string, filter?: (item: Doc) => boolean) {
  const db = ctx.db.hot;
  if (filter) return listFiltered(ctx, kind, limit, beforeId, filter);
  const rows = await ctx.db.hot.page(kind.kind, limit + 1, beforeId || undefined);
  const page = rows.slice(0, limit).map((r) => toStored(ctx, r));
  return { items: await present(ctx, db, kind, page), more: rows.length > limit, lastId: page.at(-1)?.id };
}

/**
 * A list with the service's `filter`: the collection is read a page at a time, newest first,
 * each item shaped and kept when the filter holds, until `limit` are kept and one more is
 * known to follow (the next page's before_id is the last kept item's id).
 */
async function listFiltered(ctx: Ctx, kind: KindEntry, limit: number, beforeId: string | undefined, filter: (item: Doc) => boolean) {
  const db = ctx.db.hot;
  const kept: Doc[] = [];
  let cursor = beforeId || undefined;
  for (;;) {
    const rows = await db.page(kind.kind, 100, cursor);
    const shaped = await present(ctx, db, kind, rows.map((r) => toStored(ctx, r)));
    for (const item of shaped) {
      if (!filter(item)) continue;
      if (kept.length === limit) return { items: kept, more: true, lastId: kept.at(-1)?.id as string | undefined };
      kept.push(item);
    }
    if (rows.length < 100) return { items: kept, more: false, lastId: kept.at(-1)?.id as string | undefined };
    cursor = rows.at(-1)!.id;
  }
}

/**
 * Re-validates a changed document as a whole and writes it (PATCH and module PUT/DELETE).
 * The row is locked before it is read, so concurrent rewrites apply one after the other,
 * each to the result of the one before: none is lost.
 */
async function rewrite(ctx: Ctx, kind: KindEntry, id: string, parentId: string | undefined, change: (full: Doc) => Doc, basePath: (string | number)[] = []) {
  return transact(ctx, kind, async (w) => {
    const prior = await loadLocked(ctx, w, kind, id, parentId, 'NO KEY UPDATE');
    behaviourOf(kind.kind).changing?.({ kind, row: prior, ctx });
    const full = mergeSecrets(prior.body, prior.secretFields);
    const parsed = parseInput(kind.create, change(full), basePath);
    const prepared = (await behaviourOf(kind.kind).prepare?.({ kind, id, body: parsed, prior, ctx, tx: w })) ?? {};
    const body = prepared.body ?? parsed;
    await checkRefs(w, kind, body, prior);
    const [pub, secretFields] = splitSecrets(kind.fields, body);
    const computed = prepared.computed ?? prior.computed;
    const internal = prepared.internal ?? prior.internal;
    await w.update(id, new Date(), { body: pub, computed }, sealFor(ctx, secretFields, internal));
    await writeRefs(w, kind, id, body, full);
    await writeKeys(w, kind, id, body, prior.parentId, full);
    // Named one by one: a stored resource's createdAt is a getter, which a spread would drop.
    const [out] = await present(ctx, w, kind, [{ id, kind: prior.kind, parentId: prior.parentId, createdAt: prior.createdAt, createdText: prior.createdText, body: pub, computed, secretFields, internal }]);
    await emit(w, kind, 'updated', out);
    return out;
  });
}

/**
 * Replaces fields a caller may not change in place, for the server itself: a certificate it
 * issued is renewed under the same id (ingress/acme). The same write path, checks and
 * `updated` event as a PATCH.
 */
export async function replaceResource(ctx: Ctx, kind: KindEntry, id: string, fields: Doc) {
  return rewrite(ctx, kind, id, undefined, (full) => ({ ...full, ...fields }));
}

export async function updateResource(ctx: Ctx, kind: KindEntry, id: string, input: unknown, pathParams: Record<string, string> = {}) {
  const given = requireObject(dropPathIds(kind, input, pathParams)) as Doc;
  // null names no value: for a field that cannot change it asks for no change, like absence.
  const body = Object.fromEntries(Object.entries(given).filter(([k, v]) => !(v === null && kind.immutable.includes(k))));
  const fixed = kind.immutable.filter((f) => f in body);
  if (fixed.length) {
    throw new ApiError('ERR_SERVICE_106', `${fixed[0]}: cannot be changed after creation; create a new ${label(kind)} instead`, { field: fixed[0], reason: 'cannot be changed after creation' });
  }
  const patch = parseInput(kind.update, body);
  const defined = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined && v !== null));
  return rewrite(ctx, kind, id, pathParams[kind.parent?.field ?? ''], (full) => ({ ...full, ...defined }));
}

export async function getModule(ctx: Ctx, kind: KindEntry, name: string, id: string, parentId?: string) {
  const out = await getResource(ctx, kind, id, parentId);
  if (out[name] == null) throw new ApiError('ERR_SERVICE_302', `${name} is not set on ${label(kind)} ${id}`, { id, module: name });
  return out[name];
}

/** A PUT body may be the bare module or `{ "module": {...} }`, either with the path's ids repeated. */
function unwrapModuleBody(kind: KindEntry, input: unknown, pathParams: Record<string, string>) {
  const body = requireObject(input);
  const wrapped = body.module && typeof body.module === 'object' && !Array.isArray(body.module)
    && Object.keys(body).every((k) => ['module', 'id', kind.parent?.field ?? 'id'].includes(k));
  const rest = dropPathIds(kind, body, pathParams) as Doc;
  return wrapped ? (body.module as Doc) : rest;
}

export async function putModule(ctx: Ctx, kind: KindEntry, name: string, id: string, input: unknown, pathParams: Record<string, string> = {}) {
  const module = kind.modules[name];
  const parsedModule = parseInput(module.schema, unwrapModuleBody(kind, input, pathParams));
  try {
    const out = await rewrite(ctx, kind, id, pathParams[kind.parent?.field ?? ''], (full) => ({ ...full, [name]: parsedModule }));
    return out[name];
  } catch (e) {
    throw relativeTo(name, e);
  }
}

/** A module PUT's body is the module: fields inside it are named from there (`ip_policy_ids`, not `ip_restriction.ip_policy_ids`). */
function relativeTo(name: string, e: unknown): unknown {
  const field = e instanceof ApiError ? e.details.field : undefined;
  if (typeof field !== 'string' || !field.startsWith(`${name}.`) || !(e as ApiError).message.startsWith(`${field}: `)) return e;
  const err = e as ApiError;
  const strip = (f: string) => (f.startsWith(`${name}.`) ? f.slice(name.length + 1) : f);
  const details: Record<string, unknown> = { ...err.details, field: strip(field) };
  if (Array.isArray(details.problems)) details.problems = details.problems.map((p: { field: string }) => ({ ...p, field: strip(p.field) }));
  return new ApiError(err.code, `${strip(field)}: ${err.message.slice(field.length + 2)}`, details, err.headers);
}

export async function deleteModule(ctx: Ctx, kind: KindEntry, name: string, id: string, parentId?: string) {
  await rewrite(ctx, kind, id, parentId, (full) => {
    if (full[name] == null) throw new ApiError('ERR_SERVICE_302', `${name} is not set on ${label(kind)} ${id}`, { id, module: name });
    return { ...full, [name]: null };
  });
}

/** Deletes a resource and its children, honouring each reference's delete rule. */
export async function deleteResource(ctx: Ctx, kind: KindEntry, id: string, parentId?: string) {
  await transact(ctx, kind, async (w) => {
    // Locked first: of two overlapping deletes the second waits, then finds nothing (404).
    const row = await loadLocked(ctx, w, kind, id, parentId, 'UPDATE');
    await behaviourOf(kind.kind).deleting?.({ kind, row, ctx, tx: w });
    await deleteTree(ctx, w, kind, row);
  }, 'delete');
}

/**
 * Deletes a resource, its children (each with its own deleted event, newest first, before
 * the parent's) and what cascades from it. `checked`: an ancestor already vetted the subtree's referrers.
 */
async function deleteTree(ctx: Ctx, w: Writes, kind: KindEntry, row: StoredResource, checked = false) {
  if (!checked) {
    // The subtree is locked as it is walked: a new child or referrer of any of it waits for
    // this transaction, so the referrers read below are all there are.
    const subtree = [row.id];
    for (let i = 0; i < subtree.length; i++) {
      await w.lockChildren([subtree[i]]);
      const children = await w.childrenOfParent(subtree[i]);
      subtree.push(...children.map((c) => c.id));
    }
    const inside = new Set(subtree);
    const referrers = (await w.referrers(subtree)).filter((r) => !inside.has(r.fromId));
    const restricting = referrers.filter((r) => r.onDelete === 'restrict');
    if (restricting.length) {
      const ids = [...new Set(restricting.map((r) => r.fromId))];
      throw new ApiError('ERR_SERVICE_321', `${label(kind)} ${row.id} is still referenced by ${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ` and ${ids.length - 10} more` : ''}; remove those references first`, { referrers: ids });
    }
    for (const fromId of new Set(referrers.filter((r) => r.onDelete === 'cascade').map((r) => r.fromId))) {
      const [dependent] = await w.lock([fromId], 'UPDATE');
      if (dependent) await deleteTree(ctx, w, kindOf(dependent.kind), toStored(ctx, dependent));
    }
  }
  // The parent's event shows it as it was, children included.
  const [out] = await present(ctx, w, kind, [row]);
  const children = await w.childrenOfParent(row.id);
  for (const child of children) await deleteTree(ctx, w, kindOf(child.kind), toStored(ctx, child), true);
  await w.remove(row.id);
  await emit(w, kind, 'deleted', out);
}
