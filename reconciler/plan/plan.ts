// The planner: matches each declared document with a live resource (ownership stamp,
// explicit id, natural key), diffs normalised forms field by field, and turns the result
// into changes for people and operations for the executor, ordered by references.
import fs from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import jsonPatch from 'fast-json-patch';
import { kindOf, shapeOf, traitsOf, type KindEntry } from '../../provider/catalog/index.js';
import { comparable, liveInput } from '../../provider/catalog/normalize.js';
import { collectRefs, mapRefs, mergeSecrets, splitSecrets } from '../../provider/catalog/walk.js';
import { BACKEND_KINDS } from '../../provider/catalog/modules.js';
import { parseRef, type ChildSpec } from '../manifest/kinds.js';
import type { Desired, DesiredChild, Manifest } from '../manifest/validate.js';
import type { LiveChild, LiveResource, LiveState } from '../live/refresh.js';
import { encodeMetadata, fingerprint, isLegacySecretFingerprint, sameUserMetadata, secretsChanged, UNKNOWN, type Stamp } from '../live/stamp.js';
import type { Action, Change, Operation, Plan } from './types.js';
import { LiveIndex } from './live-index.js';
import { callerKeyProblems } from './caller-key.js';
import { didYouMean } from '../../provider/catalog/validate/suggest.js';

type Doc = Record<string, any>;

export interface PlanOptions {
  stack: string;
  apiUrl: string;
  mode: Plan['mode'];
  /** Delete managed resources that are no longer declared. */
  prune?: boolean;
  /** Take over unmanaged resources found by natural key or bound by id. */
  adopt?: boolean;
  apiCalls?: number;
  /** The id of the API key the plan's operations will run with: they must not remove it. */
  callerKeyId?: string;
  /**
   * Keyed fingerprints of the declared write-only values, by address, made by the server
   * (live/secret-fingerprints.ts); without them, write-only values are taken as unchanged.
   */
  secretFingerprints?: ReadonlyMap<string, string>;
  /** Documents to replace though unchanged (--replace ADDRESS): delete and create, or create before delete. */
  replace?: readonly string[];
}

export interface PlanResult {
  plan: Plan;
  /** Why the plan cannot be carried out (conflicts, prevent_destroy, ...): no operation runs when any. */
  problems: string[];
  /** What the user should know that does not stop the plan. */
  warnings?: string[];
}

export const SENSITIVE = '(sensitive value)';
const METADATA_LIMIT = 4096;
const equal = (a: unknown, b: unknown) => isDeepStrictEqual(a ?? null, b ?? null);

/** Puts the masked write-only values back where their objects exist (comparable forms leave them out). */
function withSecretsMasked(doc: Doc, secrets: Record<string, unknown>): Doc {
  const keys = Object.keys(secrets);
  return keys.length ? mergeSecrets(doc, Object.fromEntries(keys.map((k) => [k, SENSITIVE]))) : doc;
}

const hasMetadata = (entry: KindEntry) => 'metadata' in entry.fields;
const isModule = (entry: KindEntry, field: string) => field in entry.modules;

/** Modules that send traffic somewhere go last, so a route is never reachable before its protections are in place. */
function moduleOrder(entry: KindEntry, names: string[]): string[] {
  const carriesTraffic = (m: string) =>
    Object.values(shapeOf(entry.modules[m].schema) ?? {}).some((s) => traitsOf(s).ref?.to.some((k) => (BACKEND_KINDS as readonly string[]).includes(k)));
  return [...names.filter((m) => !carriesTraffic(m)), ...names.filter(carriesTraffic)];
}

interface Diff {
  /** Top-level fields whose values differ (or must be re-sent). */
  changed: string[];
  /** Of those, the fields whose readable values differ (not only a changed write-only value). */
  publicChanged: string[];
  /** The live stamp equals the one this plan would write. */
  stampCurrent: boolean;
  replaceFields: string[];
  metadataChanged: boolean;
  sensitiveChanged: boolean;
  /** Fields holding write-only values that must be re-sent with any update. */
  secretFields: string[];
  before: Doc;
  after: Doc;
  sWant?: string;
}

class Planner {
  readonly changes: Change[] = [];
  readonly operations: Operation[] = [];
  readonly problems: string[] = [];
  /** Address -> id of declared documents whose resource exists and keeps its id. */
  private readonly known = new Map<string, string>();
  /** Address -> the operation that creates it. */
  private readonly creators = new Map<string, number>();
  private readonly inputs = new Map<string, Doc>();
  private readonly matched = new Set<string>();
  private readonly index: LiveIndex;

  constructor(
    private readonly manifest: Manifest,
    private readonly live: LiveState,
    private readonly opts: PlanOptions,
  ) {
    this.index = new LiveIndex(live, opts.stack);
  }

  // ----------------------------------------------------------------------- identity

  private identify(d: Desired): { live?: LiveResource; owned: boolean } | undefined {
    const { stack } = this.opts;
    const take = (l: LiveResource) => {
      this.matched.add(l.id);
      return { live: l, owned: l.stamp?.stack === stack };
    };
    if (d.id) {
      const l = this.live.byId.get(d.id);
      if (!l || l.entry.kind !== d.kind) {
        this.problems.push(`${d.address} is bound to ${d.id}, which does not exist (deleted outside edgeform?); remove the id line from ${d.source.file}:${d.source.line} to create a new one`);
        return undefined;
      }
      if (l.stamp && l.stamp.stack !== stack) {
        this.problems.push(`${d.address} is bound to ${d.id}, which stack "${l.stamp.stack}" manages; one resource belongs to one stack`);
        return undefined;
      }
      return take(l);
    }
    // Two stamped alike are the two halves of an interrupted replacement: the one that was
    // applied from these manifests (equal hash), else the newest (lists are newest first).
    const candidates = this.index.stamped(d.kind, d.address).filter((l) => !this.matched.has(l.id));
    const h = candidates.length > 1 ? this.stampFor(d.address, d.entry, d.body, d.secrets, true)?.h : undefined;
    const stamped = candidates.find((l) => h && l.stamp?.h === h) ?? candidates[0];
    if (stamped) return take(stamped);
    const keyField = d.entry.naturalKey;
    if (!keyField) return { owned: false };
    const keys = new Set([d.body[keyField]].flat().filter((v) => v != null).map(String));
    // A key the API keeps unique (hostports) is held by one resource, whoever stamped it; one
    // it does not (a bot's name) names another stack's resource only by coincidence, and
    // serves to find unstamped ones for --adopt.
    const unique = !!d.entry.traits(keyField).unique;
    const holder = this.index.holding(d.kind, keyField, [...keys]).find((l) => !this.matched.has(l.id) && (unique || !l.stamp));
    if (!holder) return { owned: false };
    const what = `${keyField} ${[holder.read[keyField]].flat().filter((v) => keys.has(String(v))).join(', ')}`;
    if (holder.stamp?.stack === stack) return take(holder); // renamed document, same resource
    if (holder.stamp) {
      this.problems.push(`${d.address}: ${what} belongs to ${holder.id}, which stack "${holder.stamp.stack}" manages (as ${holder.stamp.name}); remove it there first`);
      return undefined;
    }
    if (!this.opts.adopt) {
      this.problems.push(`${d.address}: ${what} belongs to ${holder.id}, which edgeform does not manage; pass --adopt to take it over, or run "edgeform export --adopt" first`);
      return undefined;
    }
    return take(holder);
  }

  // -------------------------------------------------------------------------- helpers

  private liveInputOf(entry: KindEntry, id: string, read: Doc, parentField?: string): Doc {
    let v = this.inputs.get(id);
    if (!v) {
      v = liveInput(entry, read);
      if (parentField) delete v[parentField];
      this.inputs.set(id, v);
    }
    return v;
  }

  /** References to resources that exist (and keep their id) become ids; the rest stay `Kind/name`. */
  private resolve(entry: KindEntry, body: Doc): Doc {
    return mapRefs(entry.fields, body, (v) => (parseRef(v) ? (this.known.get(v) ?? v) : v));
  }

  /** Creates this body waits for: the creators of the references it still holds. */
  private waitsFor(entry: KindEntry, body: Doc, parent?: string): number[] {
    const out = new Set<number>();
    const add = (v: string | undefined) => {
      const c = v && parseRef(v) ? this.creators.get(v) : undefined;
      if (c !== undefined) out.add(c);
    };
    for (const r of collectRefs(entry.fields, body)) r.ids.forEach(add);
    add(parent);
    return [...out];
  }

  private op(o: Omit<Operation, 'index' | 'after'> & { after?: number[] }): number {
    const index = this.operations.length;
    this.operations.push({ ...o, index, after: [...new Set(o.after ?? [])] });
    return index;
  }

  /** A chain of operations on one resource: each waits for the previous. */
  private chain(list: Array<Omit<Operation, 'index' | 'after'> & { after?: number[] }>, first: number[] = []): number[] {
    const out: number[] = [];
    let prev = first;
    for (const o of list) {
      const i = this.op({ ...o, after: [...prev, ...(o.after ?? [])] });
      out.push(i);
      prev = [i];
    }
    return out;
  }

  private salt(address: string) {
    return `${this.opts.stack}\u0000${address}`;
  }

  /**
   * The stamp a resource gets: its stack, its address (top level only: a child is found by
   * its natural key within its parent), the hash of its public document (to tell drift from
   * a changed manifest) and the hash of its write-only values.
   */
  private stampFor(address: string, entry: KindEntry, body: Doc, secrets: Record<string, unknown>, top: boolean, protect = false): Stamp | undefined {
    if (!hasMetadata(entry)) return undefined;
    // Keyed by the server; never the unkeyed hash, which anyone reading the metadata could test guesses against.
    const sWant = Object.keys(secrets).length ? (this.opts.secretFingerprints?.get(address) ?? UNKNOWN) : undefined;
    const [pub] = splitSecrets(entry.fields, body);
    const stamp: Stamp = { stack: this.opts.stack, name: top ? address : undefined, h: fingerprint(this.salt(address), pub), s: sWant, ...(protect ? { p: true as const } : {}) };
    // A child needs its stamp only for drift and secrets: when the user's metadata leaves no
    // room for it, a child without secrets goes unstamped (drift then shows as an ordinary
    // update) rather than the manifest being refused. Top-level stamps are identity: a
    // stamp that does not fit is a problem (`stamped`).
    if (!top && !sWant && Buffer.byteLength(encodeMetadata(body.metadata ?? '', stamp)) > METADATA_LIMIT) return undefined;
    return stamp;
  }

  /**
   * Whether the live resource moved away from what edgeform applied while the manifest stayed
   * the same: the stamp's hash equals the manifest's, yet fields differ. Fields that refer to
   * a resource this plan creates or replaces change because of the plan, not by hand; a stamp
   * without a hash (an older edgeform) tells nothing.
   */
  private isDrift(entry: KindEntry, want: Doc, diff: Diff, liveStamp: Stamp | undefined, owned: boolean, stamp: Stamp | undefined): boolean {
    if (!owned || !liveStamp?.h || liveStamp.h !== stamp?.h) return false;
    const pending = new Set(collectRefs(entry.fields, want).filter((r) => r.ids.some((id) => parseRef(id))).map((r) => r.path.split(/[.[]/)[0]));
    return diff.publicChanged.some((f) => !pending.has(f)) || diff.metadataChanged;
  }

  /** The body with the user's metadata replaced by metadata carrying the stamp (when there is one). */
  private stamped(address: string, entry: KindEntry, body: Doc, stamp: Stamp | undefined): Doc {
    if (!hasMetadata(entry) || !stamp) return body;
    const metadata = encodeMetadata(body.metadata ?? '', stamp);
    if (Buffer.byteLength(metadata) > METADATA_LIMIT) {
      this.problems.push(`${address}: metadata with the ownership stamp is ${Buffer.byteLength(metadata)} bytes, over the ${METADATA_LIMIT}-byte limit; shorten the metadata by ${Buffer.byteLength(metadata) - METADATA_LIMIT} bytes`);
    }
    return { ...body, metadata };
  }

  private diff(address: string, entry: KindEntry, want: Doc, liveIn: Doc, liveUser: string, liveStamp: Stamp | undefined, owned: boolean, stamp: Stamp | undefined, secrets: Record<string, unknown>, skip: string[]): Diff {
    const shape = Object.fromEntries(Object.entries(entry.fields).filter(([k]) => k !== 'metadata' && !skip.includes(k)));
    const [d, l] = comparable(shape, want, liveIn);
    const publicChanged = Object.keys(shape).filter((f) => (d![f] !== undefined || l![f] !== undefined) && !equal(d![f], l![f]));
    const changed = [...publicChanged];
    const metadataChanged = hasMetadata(entry) && !sameUserMetadata(want.metadata ?? '', liveUser);
    const secretFields = [...new Set(Object.keys(secrets).map((p) => p.split(/[.[]/)[0]))];
    // Write-only values are compared only when edgeform recorded what it sent.
    const sensitiveChanged = owned && secretsChanged(liveStamp?.s, stamp?.s, () => fingerprint(`${this.salt(address)}#s`, secrets));
    if (owned && !sensitiveChanged && stamp?.s && isLegacySecretFingerprint(liveStamp?.s)) this.legacyStamps.add(address);
    for (const f of sensitiveChanged ? secretFields : []) if (!changed.includes(f)) changed.push(f);
    const replaceFields = changed.filter((f) => entry.immutable.includes(f));
    const withMeta = (doc: Doc, meta: string) => (hasMetadata(entry) ? { ...doc, metadata: meta } : doc);
    // Unset on both sides (null live, absent desired) is no difference worth a line.
    const before = Object.fromEntries(Object.entries(l!).filter(([k, v]) => v !== null || d![k] != null));
    return {
      changed,
      publicChanged,
      stampCurrent: !!liveStamp && !!stamp && (['stack', 'name', 'h', 's', 'p'] as const).every((k) => liveStamp[k] === stamp[k]),
      replaceFields,
      metadataChanged,
      sensitiveChanged,
      secretFields,
      before: withSecretsMasked(withMeta(before, liveUser), secrets),
      // Metadata equal as JSON keeps its live spelling, or a plan would show a change it does not make.
      after: withSecretsMasked(withMeta(d!, metadataChanged ? (want.metadata ?? '') : liveUser), secrets),
      sWant: stamp?.s,
    };
  }

  private change(c: Omit<Change, 'patch' | 'operations'> & { operations?: number[] }): Change {
    const change: Change = { ...c, patch: jsonPatch.compare(c.before ?? {}, c.after ?? {}), operations: c.operations ?? [] };
    this.changes.push(change);
    this.byAddress.set(change.address, change);
    return change;
  }

  /** Update operations for one resource: module removals, one PATCH, module PUTs. */
  private updateOps(entry: KindEntry, id: string, parent: string | undefined, want: Doc, diff: Diff, stamp: Stamp | undefined, address: string, needStamp: boolean): number[] {
    const fields = [...diff.changed];
    // An update rewrites the stamp; secrets never sent by edgeform are sent, so the stamp tells the truth.
    if (stamp?.s && !diff.sensitiveChanged) for (const f of diff.secretFields) if (!fields.includes(f) && diff.changed.length) fields.push(f);
    const removed = fields.filter((f) => isModule(entry, f) && want[f] == null);
    const put = moduleOrder(entry, fields.filter((f) => isModule(entry, f) && want[f] != null));
    const patch: Doc = {};
    for (const f of fields) if (!isModule(entry, f)) patch[f] = want[f] ?? null;
    // Module calls alone need no PATCH when the live stamp already says what they leave.
    const rewrite = diff.metadataChanged || needStamp || Object.keys(patch).length > 0 || (fields.length > 0 && !diff.stampCurrent);
    const body = rewrite ? this.stamped(address, entry, { ...patch, metadata: want.metadata ?? '' }, stamp) : patch;
    if (!hasMetadata(entry)) delete body.metadata;
    else if (!stamp && !diff.metadataChanged) delete body.metadata;
    const after = [...this.waitsFor(entry, patch), ...put.flatMap((m) => this.waitsFor(entry, { [m]: want[m] }))];
    const list: Array<Omit<Operation, 'index' | 'after'> & { after?: number[] }> = [
      ...removed.map((m) => ({ method: 'delete_module' as const, kind: entry.kind, id, parent, module: m, address, touches: [id] })),
      ...(Object.keys(body).length ? [{ method: 'update' as const, kind: entry.kind, id, parent, body, address, touches: [id] }] : []),
      ...put.map((m) => ({ method: 'put_module' as const, kind: entry.kind, id, parent, module: m, body: want[m], address, touches: [id] })),
    ];
    return this.chain(list, after);
  }

  // --------------------------------------------------------------------------- documents

  planDocument(d: Desired) {
    const found = this.identify(d);
    if (!found) return;
    const { live: l, owned } = found;
    const want = this.resolve(d.entry, d.body);
    const stamp = this.stampFor(d.address, d.entry, d.body, d.secrets, true, d.preventDestroy);
    if (!l) {
      this.createDocument(d, want, stamp, ['create']);
      return;
    }
    const adopting = !owned && hasMetadata(d.entry);
    const liveIn = this.liveInputOf(d.entry, l.id, l.read);
    const diff = this.diff(d.address, d.entry, want, liveIn, l.userMetadata, l.stamp, owned, stamp, d.secrets, d.ignore.fields);
    const drift = this.isDrift(d.entry, want, diff, l.stamp, owned, stamp);
    const forced = this.opts.replace?.includes(d.address) ? `--replace ${d.address}` : undefined;
    const lost = owned ? (lostToken(d) ?? forced) : forced;
    if (diff.replaceFields.length || lost) {
      if (d.preventDestroy) {
        const why = diff.replaceFields.length ? `changing ${diff.replaceFields.join(', ')} replaces it` : `${lost}, which replaces it`;
        this.problems.push(`${d.address} has prevent_destroy set, but ${why}; remove prevent_destroy to allow the replacement, or undo the change`);
        return;
      }
      if (adopting && !this.opts.adopt) return this.unmanaged(d, l);
      this.replaceDocument(d, l, want, stamp, diff, lost);
      return;
    }
    this.known.set(d.address, l.id);
    // Stamp what this stack manages under another name, and what --adopt takes over; a
    // resource bound by id without --adopt is only read, so it needs no stamp.
    // A changed prevent_destroy is recorded in the stamp, so the protection outlives the document.
    const needStamp = !!stamp && (owned ? l.stamp?.name !== d.address || !!l.stamp?.p !== !!stamp.p : !!this.opts.adopt);
    const ops = diff.changed.length || diff.metadataChanged || needStamp ? this.updateOps(d.entry, l.id, undefined, want, diff, stamp, d.address, needStamp) : [];
    const at = this.changes.length;
    const change = this.change({
      address: d.address,
      kind: d.kind,
      name: d.name,
      actions: [ops.length ? 'update' : 'no-op'],
      before: diff.before,
      after: diff.after,
      id: l.id,
      drift: drift || undefined,
      adopt: (adopting && ops.length > 0) || undefined,
      movedFrom: owned && l.stamp?.name && l.stamp.name !== d.address ? l.stamp.name : undefined,
      sensitiveChanged: diff.sensitiveChanged || undefined,
      operations: ops,
    });
    this.planChildren(d, l, owned || adopting);
    const touched = ops.length > 0 || this.changes.slice(at + 1).some((c) => c.actions[0] !== 'no-op');
    if (touched && !owned && !this.opts.adopt && hasMetadata(d.entry)) {
      // Bound by id but never adopted: an unmanaged resource is only read.
      this.changes.splice(at);
      return this.unmanaged(d, l);
    }
    if (touched && change.actions[0] === 'no-op' && adopting) change.adopt = true;
  }

  private unmanaged(d: Desired, l: LiveResource) {
    this.problems.push(`${d.address} is bound to ${l.id}, which edgeform does not manage, and the manifest differs from it; pass --adopt to let edgeform change it`);
  }

  /** Creates the document and its children; returns the document's change. */
  private createDocument(d: Desired, want: Doc, stamp: Stamp | undefined, actions: Action[], before: Doc | null = null, extra: Partial<Change> = {}, deleteFirst: number[] = []): Change {
    const body = this.stamped(d.address, d.entry, want, stamp);
    const create = this.op({ method: 'create', kind: d.kind, body, assigns: d.address, address: d.address, touches: [], after: [...this.waitsFor(d.entry, body), ...deleteFirst], tokenFile: d.tokenFile });
    this.creators.set(d.address, create);
    this.known.delete(d.address);
    const ops = [create];
    const kids: Array<Omit<Change, 'patch' | 'operations'> & { operations: number[] }> = [];
    for (const list of Object.values(d.children)) {
      // Children are created one after another, so they list (oldest first) in declared order.
      let previous: number[] = [];
      for (const c of list) {
        const entry = c.spec.entry;
        const op = this.createChildAfter(d, c, d.address, previous);
        previous = [op];
        kids.push({ address: childAddress(d.address, c.spec, c.key), kind: entry.kind, name: c.key, actions: ['create'], before: null, after: this.shown(entry, this.resolve(entry, c.body), c.secrets), operations: [op] });
      }
    }
    const change = this.change({
      address: d.address,
      kind: d.kind,
      name: d.name,
      actions,
      before,
      after: this.shown(d.entry, want, d.secrets),
      operations: [...deleteFirst, ...ops],
      tokenFile: d.tokenFile,
      ...extra,
    });
    for (const k of kids) this.change(k);
    return change;
  }

  /** A desired document as shown: comparable fields, write-only values masked, the user's metadata. */
  private shown(entry: KindEntry, want: Doc, secrets: Record<string, unknown>): Doc {
    const [d] = comparable(Object.fromEntries(Object.entries(entry.fields).filter(([k]) => k !== 'metadata')), want, want);
    return withSecretsMasked(hasMetadata(entry) ? { ...d, metadata: want.metadata ?? '' } : d!, secrets);
  }

  private createChild(d: Desired, c: DesiredChild, parent: string): number {
    const entry = c.spec.entry;
    const want = this.resolve(entry, c.body);
    const address = childAddress(d.address, c.spec, c.key);
    const stamp = this.stampFor(address, entry, c.body, c.secrets, false);
    const body = this.stamped(address, entry, want, stamp);
    return this.op({ method: 'create', kind: entry.kind, parent, body, address, touches: [], after: this.waitsFor(entry, body, parent) });
  }

  private replaceDocument(d: Desired, l: LiveResource, want: Doc, stamp: Stamp | undefined, diff: Diff, reason?: string) {
    const childIds = Object.values(l.children).flat().map((c) => c.id);
    // Unique natural keys (hostports) cannot exist twice: delete first. Otherwise create
    // first, so referrers move to the new resource before the old one goes.
    const uniqueKeys = Object.keys(d.entry.fields).some((f) => d.entry.traits(f).unique && !d.entry.traits(f).unique!.perParent);
    const del = { method: 'delete' as const, kind: d.kind, id: l.id, address: d.address, touches: [l.id, ...childIds] };
    const extra = { id: l.id, replacePaths: diff.replaceFields.map((f) => `/${f}`), sensitiveChanged: diff.sensitiveChanged || undefined, replaceReason: reason };
    if (uniqueKeys) {
      const first = this.op(del);
      this.createDocument(d, want, stamp, ['delete', 'create'], diff.before, extra, [first]);
      this.cascade(l, d.address, first, ['delete', 'create']);
    } else {
      const change = this.createDocument(d, want, stamp, ['create', 'delete'], diff.before, extra);
      // The old one goes only once the new one exists: a failed create keeps it.
      const last = this.op({ ...del, after: [this.creators.get(d.address)!] });
      change.operations.push(last);
      change.after = diff.after;
      this.cascade(l, d.address, last, ['create', 'delete']);
    }
  }

  /**
   * Lists the children a parent's delete takes with it (the server deletes them with their
   * parent, so no call of their own), as Terraform lists every resource it destroys: the plan
   * counts what goes. A child the replacement creates again under the same key becomes its
   * replacement (`order`); the others are deletes.
   */
  private cascade(l: LiveResource, parentAddress: string, del: number, order: Action[] = ['delete']) {
    for (const kids of Object.values(l.children)) {
      for (const k of kids) {
        const address = childAddress(parentAddress, k.spec, k.key);
        const again = this.byAddress.get(address);
        if (again && again.actions.length === 1 && again.actions[0] === 'create') {
          const before = this.childBefore(k, again.after ?? {});
          Object.assign(again, { actions: order, before, id: k.id, parentId: l.id, patch: jsonPatch.compare(before, again.after ?? {}) });
          again.operations.push(del);
          continue;
        }
        this.change({ address, kind: k.spec.entry.kind, name: k.key, actions: ['delete'], before: this.childBefore(k), after: null, id: k.id, parentId: l.id, operations: [del] });
      }
    }
  }

  // ----------------------------------------------------------------------------- children

  /** Diffs the children of a live parent. */
  private planChildren(d: Desired, l: LiveResource, managed: boolean) {
    for (const [key, desired] of Object.entries(d.children)) {
      const liveKids = l.children[key] ?? [];
      const byKey = new Map(liveKids.map((k) => [k.key, k]));
      const unmatchedDesired: DesiredChild[] = [];
      const seen = new Set<string>();
      for (const c of desired) {
        const lk = byKey.get(c.key);
        if (lk) {
          seen.add(lk.id);
          this.planChild(d, l, c, lk);
        } else unmatchedDesired.push(c);
      }
      const unmatchedLive = liveKids.filter((k) => !seen.has(k.id));
      if (!managed) continue;
      // A child whose natural key changed shows as its replacement (a route renamed).
      const pairs = Math.min(unmatchedDesired.length, unmatchedLive.length);
      let previous: number[] = [];
      for (let i = 0; i < unmatchedDesired.length; i++) {
        const c = unmatchedDesired[i];
        const old = i < pairs ? unmatchedLive[i] : undefined;
        const address = childAddress(d.address, c.spec, c.key);
        const first = old ? [this.op(this.deleteChildOp(l, old, address))] : [];
        const create = this.createChildAfter(d, c, l.id, [...first, ...previous]);
        previous = [create];
        const entry = c.spec.entry;
        const after = this.shown(entry, this.resolve(entry, c.body), c.secrets);
        this.change({
          address,
          kind: entry.kind,
          name: c.key,
          actions: old ? ['delete', 'create'] : ['create'],
          before: old ? this.childBefore(old, after) : null,
          after,
          id: old?.id,
          parentId: l.id,
          replacePaths: old ? [`/${c.spec.naturalKey}`] : undefined,
          operations: [...first, create],
        });
      }
      for (const old of unmatchedLive.slice(pairs)) {
        const address = childAddress(d.address, old.spec, old.key);
        // No --prune: a child is part of its parent's document, and the parent's document says it is gone.
        this.change({ address, kind: old.spec.entry.kind, name: old.key, actions: ['delete'], before: this.childBefore(old), after: null, id: old.id, parentId: l.id, removedFrom: d.address, operations: [this.op(this.deleteChildOp(l, old, address))] });
      }
    }
  }

  private createChildAfter(d: Desired, c: DesiredChild, parentId: string, first: number[]): number {
    const i = this.createChild(d, c, parentId);
    this.operations[i].after.push(...first);
    return i;
  }

  private deleteChildOp(l: LiveResource, old: LiveChild, address: string) {
    return { method: 'delete' as const, kind: old.spec.entry.kind, id: old.id, parent: l.id, address, touches: [old.id] };
  }

  /**
   * A live child's input form. Beside an `after` (a replacement), fields unset on both sides
   * (null live, absent desired) are left out, as in an update: a renamed route listed every
   * module it never had as `- oauth = null`.
   */
  private childBefore(k: LiveChild, after?: Doc): Doc {
    const entry = k.spec.entry;
    const input = this.liveInputOf(entry, k.id, k.read, k.spec.parentField);
    const kept = after ? Object.fromEntries(Object.entries(input).filter(([f, v]) => v !== null || after[f] != null)) : input;
    return { ...kept, metadata: k.userMetadata };
  }

  private planChild(d: Desired, l: LiveResource, c: DesiredChild, lk: LiveChild) {
    const entry = c.spec.entry;
    const address = childAddress(d.address, c.spec, c.key);
    const want = this.resolve(entry, c.body);
    const stamp = this.stampFor(address, entry, c.body, c.secrets, false);
    const liveIn = this.liveInputOf(entry, lk.id, lk.read, c.spec.parentField);
    const owned = lk.stamp?.stack === this.opts.stack;
    const diff = this.diff(address, entry, want, liveIn, lk.userMetadata, lk.stamp, owned, stamp, c.secrets, [c.spec.parentField, ...(d.ignore.children[c.spec.key] ?? [])]);
    const base = { address, kind: entry.kind, name: c.key, before: diff.before, after: diff.after, id: lk.id, parentId: l.id, sensitiveChanged: diff.sensitiveChanged || undefined };
    if (diff.replaceFields.length) {
      const first = this.op(this.deleteChildOp(l, lk, address));
      const create = this.createChildAfter(d, c, l.id, [first]);
      this.change({ ...base, actions: ['delete', 'create'], replacePaths: diff.replaceFields.map((f) => `/${f}`), operations: [first, create] });
      return;
    }
    // A stamp whose `s` differs only in form (the old unkeyed hash of the same values, or
    // values never fingerprinted) is rewritten by the next update, not by an update of its own.
    const needStamp = !!stamp && lk.stamp?.s !== stamp.s && (diff.changed.length > 0 || diff.metadataChanged || diff.sensitiveChanged);
    const ops = diff.changed.length || diff.metadataChanged || needStamp ? this.updateOps(entry, lk.id, l.id, want, diff, stamp, address, needStamp) : [];
    const drift = this.isDrift(entry, want, diff, lk.stamp, owned, stamp);
    this.change({ ...base, actions: [ops.length ? 'update' : 'no-op'], drift: (drift && ops.length > 0) || undefined, operations: ops });
  }

  // ------------------------------------------------------------------------------ deletes

  planDeletes() {
    const { stack, mode, prune } = this.opts;
    const declared = new Map(this.manifest.documents.map((d) => [d.address, d]));
    for (const [kind, list] of this.live.byKind) {
      for (const l of list) {
        if (this.matched.has(l.id) && mode !== 'destroy') continue;
        // Only what carries this stack's stamp is deleted: nothing else is provably its own.
        if (l.stamp?.stack !== stack) continue;
        const name = l.stamp?.name ?? `${kind}/${l.read.name ?? l.id}`;
        const doc = declared.get(name);
        // Stamped as a declared document that another resource is (or, in destroy, as one
        // already deleted here): the old half of a create-before-delete replacement that was
        // cut off. Apply finishes the replacement; it is no leftover of the manifests.
        const deposed = (mode !== 'destroy' && !!doc) || this.deleted.has(name);
        const address = deposed ? `${name} (deposed ${l.id})` : name;
        this.deleted.add(name);
        if (mode !== 'destroy' && !prune && !(deposed && mode === 'apply' && !doc?.preventDestroy)) {
          this.orphans.push(address);
          continue;
        }
        if (doc?.preventDestroy) {
          this.problems.push(`${address} has prevent_destroy set; remove it from ${doc.source.file}:${doc.source.line} to delete it`);
          continue;
        }
        if (l.stamp?.p && !doc) {
          this.problems.push(`${address} is protected by prevent_destroy, recorded when it was last applied; its document is no longer declared, but the protection stays. To delete it, declare it again with prevent_destroy: false, apply, then remove it`);
          continue;
        }
        const childIds = Object.values(l.children).flat().map((c) => c.id);
        const op = this.op({ method: 'delete', kind, id: l.id, address, touches: [l.id, ...childIds] });
        this.change({ address, kind, name: name.slice(kind.length + 1), actions: ['delete'], before: { ...this.liveInputOf(l.entry, l.id, l.read), ...(hasMetadata(l.entry) ? { metadata: l.userMetadata } : {}) }, after: null, id: l.id, operations: [op] });
        this.cascade(l, address, op);
      }
    }
  }

  /**
   * Lists what the server deletes along with a resource this plan deletes: live resources
   * whose cascading reference names it (a bot's API keys and credentials, through
   * `owner_id`), so that the plan counts everything that goes, as Terraform does. One that
   * another stack manages, or that the manifests keep, is a problem: a stack deletes only
   * what is provably its own, and never what it declares.
   */
  planCascades() {
    const { stack } = this.opts;
    const referrers = new Map<string, Array<{ l: LiveResource; field: string }>>();
    for (const list of this.live.byKind.values()) {
      for (const l of list) {
        for (const r of collectRefs(l.entry.fields, this.liveInputOf(l.entry, l.id, l.read))) {
          if (r.ref.onDelete !== 'cascade') continue;
          for (const id of r.ids) referrers.set(id, [...(referrers.get(id) ?? []), { l, field: r.path }]);
        }
      }
    }
    const deleting = new Map<string, { op: number; address: string }>();
    for (const o of this.operations) if (o.method === 'delete' && o.id && !parseRef(o.id) && !o.parent) deleting.set(o.id, { op: o.index, address: o.address });
    const queue = [...deleting.keys()];
    while (queue.length) {
      const id = queue.shift()!;
      const by = deleting.get(id)!;
      for (const { l, field } of referrers.get(id) ?? []) {
        if (deleting.has(l.id)) continue;
        const address = l.stamp?.stack === stack && l.stamp.name ? l.stamp.name : `${l.entry.kind}/${l.id}`;
        const why = `deleting ${by.address} deletes ${l.entry.kind} ${l.id} with it (the server deletes what its ${field} names)`;
        if (l.stamp && l.stamp.stack !== stack) {
          this.problems.push(`${why}, which stack "${l.stamp.stack}" manages as ${l.stamp.name}; a stack deletes only its own resources: point ${field} elsewhere, or delete it in stack "${l.stamp.stack}", first`);
          continue;
        }
        if (this.matched.has(l.id)) {
          this.problems.push(`${why}, which the manifests declare as ${address}; keep ${by.address} declared, or remove ${address} from the manifests too`);
          continue;
        }
        deleting.set(l.id, by);
        queue.push(l.id);
        const orphan = this.orphans.indexOf(address);
        if (orphan >= 0) this.orphans.splice(orphan, 1);
        const before = { ...this.liveInputOf(l.entry, l.id, l.read), ...(hasMetadata(l.entry) ? { metadata: l.userMetadata } : {}) };
        this.change({ address, kind: l.entry.kind, name: address.slice(l.entry.kind.length + 1), actions: ['delete'], before, after: null, id: l.id, deletedWith: by.address, operations: [by.op] });
        this.cascade(l, address, by.op);
      }
    }
  }

  readonly orphans: string[] = [];
  /** Addresses whose live `s` is the old unkeyed hash of unchanged values (rewritten by their next update). */
  readonly legacyStamps = new Set<string>();
  private readonly byAddress = new Map<string, Change>();
  /** Addresses planDeletes has deleted (a second resource stamped alike is deposed). */
  private readonly deleted = new Set<string>();

  /** A delete waits for every operation on a resource that refers to what it deletes. */
  orderDeletes() {
    const referrers = new Map<string, Set<string>>();
    const note = (from: string, entry: KindEntry, input: Doc) => {
      for (const r of collectRefs(entry.fields, input)) for (const id of r.ids) referrers.set(id, (referrers.get(id) ?? new Set()).add(from));
    };
    for (const list of this.live.byKind.values()) {
      for (const l of list) {
        note(l.id, l.entry, this.liveInputOf(l.entry, l.id, l.read));
        for (const kids of Object.values(l.children)) for (const k of kids) note(k.id, k.spec.entry, this.liveInputOf(k.spec.entry, k.id, k.read, k.spec.parentField));
      }
    }
    const byTouched = this.opsByTouched();
    for (const o of this.operations) {
      if (o.method !== 'delete') continue;
      for (const t of o.touches) {
        for (const r of referrers.get(t) ?? []) {
          for (const i of byTouched.get(r) ?? []) if (i !== o.index && !o.touches.includes(r)) o.after.push(i);
        }
      }
      o.after = [...new Set(o.after)];
    }
  }

  /**
   * A create or update that takes a unique value (a hostport) from another resource waits
   * for that resource's operations, which free it; without this, moving a hostport from one
   * edge to another failed with a conflict whenever the taker ran first. A swap cannot be
   * ordered (each waits for the other) and is left to fail with the API's conflict.
   */
  orderUniqueValues() {
    const uniqueFields = (entry: KindEntry) =>
      Object.entries(entry.fields).flatMap(([f, schema]) => {
        const u = traitsOf(schema).unique;
        return u && !u.perParent ? [[f, u.scope] as const] : [];
      });
    const holders = new Map<string, string>();
    for (const list of this.live.byKind.values()) {
      for (const l of list) {
        for (const [f, scope] of uniqueFields(l.entry)) for (const v of [this.liveInputOf(l.entry, l.id, l.read)[f] ?? []].flat()) holders.set(`${scope}\u0000${v}`, l.id);
      }
    }
    if (!holders.size) return;
    const byTouched = this.opsByTouched();
    for (const o of this.operations) {
      if ((o.method !== 'create' && o.method !== 'update') || !o.body) continue;
      for (const [f, scope] of uniqueFields(kindOf(o.kind))) {
        for (const v of [o.body[f] ?? []].flat()) {
          const holder = holders.get(`${scope}\u0000${v}`);
          if (!holder || holder === o.id) continue;
          for (const i of byTouched.get(holder) ?? []) if (i !== o.index && !this.dependsOn(i, o.index)) o.after.push(i);
        }
      }
      o.after = [...new Set(o.after)];
    }
  }

  private opsByTouched(): Map<string, number[]> {
    const byTouched = new Map<string, number[]>();
    for (const o of this.operations) for (const t of o.touches) byTouched.set(t, [...(byTouched.get(t) ?? []), o.index]);
    return byTouched;
  }

  /** Whether operation `from` waits, directly or not, for operation `on`. */
  private dependsOn(from: number, on: number): boolean {
    const seen = new Set<number>();
    const stack = [from];
    while (stack.length) {
      const i = stack.pop()!;
      if (i === on) return true;
      if (seen.has(i)) continue;
      seen.add(i);
      stack.push(...this.operations[i].after);
    }
    return false;
  }
}

/**
 * Why a resource whose once-returned token was to be kept in token_file must be replaced:
 * the file is not there (the apply that created it was cut off before writing it, or it was
 * removed), and the server never returns the token again, so only a new resource has one.
 */
function lostToken(d: Desired): string | undefined {
  if (!d.tokenFile || fs.existsSync(d.tokenFile)) return undefined;
  return `token_file ${d.tokenFile} does not exist: the token cannot be recovered, so the key is replaced`;
}

export const childAddress = (parent: string, spec: ChildSpec, key: string) => `${parent}.${spec.key}[${JSON.stringify(key)}]`;

/** Documents in reference order (what a document refers to comes first); a cycle is a problem. */
function referenceOrder(manifest: Manifest, problems: string[]): Desired[] {
  const out: Desired[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (d: Desired, trail: string[]) => {
    const s = state.get(d.address);
    if (s === 'done') return;
    if (s === 'visiting') {
      problems.push(`reference cycle: ${[...trail.slice(trail.indexOf(d.address)), d.address].join(' -> ')}`);
      return;
    }
    state.set(d.address, 'visiting');
    for (const dep of d.dependsOn) {
      const t = manifest.byAddress.get(dep);
      if (t && t !== d) visit(t, [...trail, d.address]);
    }
    state.set(d.address, 'done');
    out.push(d);
  };
  for (const d of manifest.documents) visit(d, []);
  return out;
}

/** A fingerprint of a live resource as the plan saw it (with its children), to detect a stale saved plan. */
export function liveFingerprint(l: LiveResource | undefined): string | null {
  if (!l) return null;
  return fingerprint('live', { read: l.read, children: Object.fromEntries(Object.entries(l.children).map(([k, v]) => [k, v.map((c) => c.read)])) });
}

export function makePlan(manifest: Manifest, live: LiveState, opts: PlanOptions): PlanResult {
  const p = new Planner(manifest, live, opts);
  const ordered = referenceOrder(manifest, p.problems);
  for (const r of opts.replace ?? []) {
    if (r.includes('.')) p.problems.push(`--replace ${r}: only a document (Kind/name) can be replaced; a child is replaced with its document, or by changing its key`);
    else if (!ordered.some((d) => d.address === r)) p.problems.push(`--replace ${r} names no declared document${didYouMean(r, ordered.map((d) => d.address))}`);
  }
  if (opts.mode !== 'destroy') for (const d of ordered) p.planDocument(d);
  p.planDeletes();
  p.planCascades();
  p.orderDeletes();
  p.orderUniqueValues();
  if (opts.mode !== 'refresh-only') p.problems.push(...callerKeyProblems(p.changes, p.operations, live, opts.callerKeyId));
  const fingerprints = planFingerprints(p.changes, live);
  const changes = opts.mode === 'refresh-only' ? refreshOnlyChanges(p.changes) : p.changes;
  return {
    plan: {
      stack: opts.stack,
      apiUrl: opts.apiUrl,
      createdAt: new Date().toISOString(),
      mode: opts.mode,
      changes,
      operations: opts.mode === 'refresh-only' ? [] : p.operations,
      orphans: p.orphans,
      fingerprints,
      apiCalls: opts.apiCalls ?? 0,
    },
    problems: p.problems,
    warnings: legacyWarnings(p.legacyStamps, p.changes),
  };
}

/** Old unkeyed secret fingerprints that this plan leaves in place (no update rewrites them). */
function legacyWarnings(legacy: ReadonlySet<string>, changes: readonly Change[]): string[] {
  const left = changes.filter((c) => legacy.has(c.address) && c.actions[0] === 'no-op').map((c) => c.address);
  if (!left.length) return [];
  return [
    `${left.length} resource${left.length === 1 ? '' : 's'} still carr${left.length === 1 ? 'ies' : 'y'} the old, unkeyed fingerprint of ${left.length === 1 ? 'its' : 'their'} write-only values, against which anyone who can read ${left.length === 1 ? 'it' : 'them'} can test guesses offline: ${left.join(', ')}. The secrets are unchanged, so nothing is planned; the next update of each writes a keyed fingerprint (docs/manifest.md, "Secrets"). Rotate any secret that is easy to guess.`,
  ];
}

/**
 * What a refresh-only plan reports: drift, and every declared resource that does not exist,
 * as deleted (Terraform's "has been deleted"). With no state, edgeform cannot tell a
 * resource deleted by hand from one never applied; either way the live state lacks it.
 */
function refreshOnlyChanges(changes: readonly Change[]): Change[] {
  const out: Change[] = [];
  for (const c of changes) {
    if (c.actions.length === 1 && c.actions[0] === 'create') {
      out.push({ ...c, actions: ['delete'], before: c.after, after: null, patch: [], drift: true, deletedOutside: true, tokenFile: undefined, operations: [] });
    } else if (c.drift) out.push({ ...c, operations: [] });
  }
  return out;
}

/**
 * What each change was planned against: the live resource (a child's parent, whose read
 * holds its children), or null for a resource that did not exist yet.
 */
export function planFingerprints(changes: readonly Change[], live: LiveState): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const c of changes) {
    if (c.actions[0] === 'no-op') continue;
    const owner = c.parentId ?? c.id;
    out[c.address] = owner ? liveFingerprint(live.byId.get(owner)) ?? 'missing' : null;
  }
  return out;
}
