// Plan, apply, read and import for every resource type, driven by the schema nodes the
// walker made from the catalog. Terraform's rules shape it: a plan keeps configured values
// (or the prior state's, when they normalise equal), fills defaults for unset optional
// values, and marks what the server will set as unknown; an apply returns every known
// planned value unchanged and fills in the unknowns from the server's answer.
import { isDeepStrictEqual } from 'node:util';
import type { ApiClient } from '../client/index.js';
import { kindOf } from '../catalog/index.js';
import { normalizeDesired, preferDeclared, sameNormalized } from '../catalog/normalize.js';
import { hasUnknown, isUnknown, unknown } from './cty.js';
import { error, failureDiagnostic, issueDiagnostic, type Diagnostic } from './diagnostics.js';
import type { AttrNode, ObjectNode, ResourceType } from './schema.js';

type Doc = Record<string, any>;
type Path = (string | number)[];

const equal = (a: unknown, b: unknown) => isDeepStrictEqual(a ?? null, b ?? null);

interface BodyOptions {
  /** Leave out unknown values (a server default not known yet): the body is sent. */
  send?: boolean;
  /** Leave out write-only values: the body is compared with what the server echoes. */
  public?: boolean;
  /** Keep `X_wo_version` values: a changed version is a change to send, though the API has no such field. */
  versions?: boolean;
}

/**
 * The value with each secret X filled from its write-only twin `X_wo` in the configuration
 * (which terraform passes to validate, plan and apply, and never stores), at every level.
 */
export function mergeWriteOnly(node: ObjectNode, value: Doc | null | undefined, config: Doc | null | undefined): Doc | null | undefined {
  if (!value || !config) return value;
  const out: Doc = { ...value };
  for (const a of node.attributes) if (a.writeOnlyOf && config[a.name] != null) out[a.writeOnlyOf] = config[a.name];
  for (const b of node.blocks) {
    const v = out[b.name];
    const c = config[b.name];
    if (v == null || c == null || isUnknown(v) || isUnknown(c)) continue;
    out[b.name] = b.nesting === 'single' ? mergeWriteOnly(b.block, v, c) : (v as Doc[]).map((e, i) => mergeWriteOnly(b.block, e, (c as Doc[])[i]));
  }
  return out;
}

/** A secret set twice (X and X_wo), or a required one set neither way, at every level. */
function writeOnlyProblems(node: ObjectNode, config: Doc | null | undefined, path: Path = []): Diagnostic[] {
  if (!config || isUnknown(config)) return [];
  const out: Diagnostic[] = [];
  for (const a of node.attributes) {
    if (!a.writeOnlyOf) continue;
    const secret = node.attributes.find((x) => x.name === a.writeOnlyOf)!;
    if (config[a.name] != null && config[secret.name] != null) out.push(error(`Both ${secret.name} and ${a.name} are set`, `Set one: ${a.name} (write-only, kept out of the state) or ${secret.name}.`, undefined, [...path, a.name]));
    else if (secret.requiredOrWo && config[a.name] == null && config[secret.name] == null) {
      const type = typeof secret.type === 'string' ? secret.type : 'value';
      out.push(error('Invalid configuration', `${[...path, secret.name].join('.')}: is required (${type}); or set ${a.name} instead (write-only, kept out of the state).`, undefined, [...path, secret.name]));
    }
  }
  for (const b of node.blocks) {
    const c = config[b.name];
    if (c == null || isUnknown(c)) continue;
    if (b.nesting === 'single') out.push(...writeOnlyProblems(b.block, c, [...path, b.name]));
    else (c as Doc[]).forEach((e, i) => out.push(...writeOnlyProblems(b.block, e, [...path, b.name, i])));
  }
  return out;
}

/** The create-body form of a Terraform object: input attributes and blocks, null left out. */
export function bodyOf(node: ObjectNode, value: Doc | null | undefined, opts: BodyOptions = {}): Doc {
  const out: Doc = {};
  if (!value) return out;
  for (const a of node.attributes) {
    const v = value[a.name];
    if (a.role !== 'input' || v == null || (opts.send && isUnknown(v)) || (opts.public && a.keep === 'config') || a.writeOnlyOf || (a.versionOf && !opts.versions)) continue;
    out[a.name] = v;
  }
  for (const b of node.blocks) {
    const v = value[b.name];
    if (v == null) continue;
    if (isUnknown(v)) {
      if (!opts.send) out[b.name] = v;
    } else out[b.name] = b.nesting === 'single' ? bodyOf(b.block, v, opts) : (v as Doc[]).map((e) => bodyOf(b.block, e, opts));
  }
  return out;
}

const parentAttr = (node: ObjectNode) => node.attributes.find((a) => a.role === 'parent');

// ---------------------------------------------------------------------------------- plan

interface PlanContext {
  /** The configuration had no unknown values (so the whole-document normalisation ran). */
  known: boolean;
  replace: Path[];
}

function planAttr(a: AttrNode, config: Doc, prior: Doc | null, norm: Doc | undefined, ctx: PlanContext): unknown {
  const c = config?.[a.name];
  const p = prior?.[a.name];
  // Write-only values are never planned (terraform requires null); their version is.
  if (a.writeOnlyOf) return null;
  if (a.role === 'parent' || isUnknown(c) || hasUnknown(c)) return c;
  if (a.versionOf) return c ?? null;
  if (c != null) return p != null && a.field && sameNormalized(a.field, c, p) ? p : c;
  if (a.keep === 'config') return null;
  if (a.serverDefault) return prior ? (p ?? null) : unknown;
  if (norm) return norm[a.name] ?? null;
  // Some value was unknown, so only the field's own default is certain.
  const d = a.field?.safeParse(undefined);
  if (d?.success && d.data !== undefined) return d.data;
  return ctx.known ? null : unknown;
}

function planObject(node: ObjectNode, config: Doc, prior: Doc | null, norm: Doc | undefined, ctx: PlanContext, path: Path): Doc {
  const out: Doc = {};
  for (const a of node.attributes) {
    if (a.role === 'computed') continue;
    out[a.name] = planAttr(a, config, prior, norm, ctx);
    // A write-only value that the state lacks (after an import) is adopted, not a replacement:
    // the server never says what it holds.
    const adopted = a.keep === 'config' && prior != null && prior[a.name] == null;
    if (a.replace && prior && !adopted && !equal(out[a.name], prior[a.name])) ctx.replace.push([...path, a.name]);
    // A new version of an immutable secret's write-only value replaces, as a new value of the secret would.
    const secret = a.versionOf ? node.attributes.find((x) => x.name === a.versionOf) : undefined;
    if (secret?.replace && prior && !equal(out[a.name], prior[a.name] ?? null)) ctx.replace.push([...path, a.name]);
  }
  for (const b of node.blocks) {
    const c = config?.[b.name];
    const p = prior?.[b.name];
    const n = norm?.[b.name] ?? undefined;
    if (c == null) out[b.name] = b.nesting === 'single' ? null : [];
    else if (isUnknown(c)) out[b.name] = c;
    else if (b.nesting === 'single') out[b.name] = planObject(b.block, c, p ?? null, n, ctx, [...path, b.name]);
    else out[b.name] = (c as Doc[]).map((e, i) => planObject(b.block, e, p?.[i] ?? null, n?.[i], ctx, [...path, b.name, i]));
  }
  // Secrets change nothing the server computes (and an import adopts them without a change).
  const changed = !prior || !equal(bodyOf(node, out, { public: true }), bodyOf(node, prior, { public: true }));
  for (const a of node.attributes) {
    if (a.role !== 'computed') continue;
    // What the server sets is unknown until it has answered, and may change with any change.
    const kept = a.stable || a.keep === 'prior' || !changed || (a.follows !== undefined && prior != null && a.follows.every((f) => equal(out[f], prior[f])));
    out[a.name] = prior && kept ? (prior[a.name] ?? null) : unknown;
  }
  return out;
}

export interface PlanResult {
  planned: Doc | null;
  replace: Path[];
  diagnostics: Diagnostic[];
}

export function planChange(rt: ResourceType, prior: Doc | null, proposed: Doc | null, config: Doc | null): PlanResult {
  if (proposed == null || config == null) return { planned: null, replace: [], diagnostics: [] };
  const body = bodyOf(rt.node, mergeWriteOnly(rt.node, config, config));
  const known = !hasUnknown(body);
  const diagnostics: Diagnostic[] = [];
  let norm: Doc | undefined;
  if (known) {
    const r = normalizeDesired(rt.kind, body);
    if (r.ok) norm = r.value;
    else diagnostics.push(...r.issues.map((i) => issueDiagnostic(rt.node, i)));
  }
  const ctx: PlanContext = { known, replace: [] };
  const planned = planObject(rt.node, config, prior, norm, ctx, []);
  return { planned, replace: ctx.replace, diagnostics };
}

/** Validation of a configuration: the whole document when it is known, else each known field. */
export function validateConfig(rt: ResourceType, config: Doc | null): Diagnostic[] {
  if (!config) return [];
  const twice = writeOnlyProblems(rt.node, config);
  if (twice.length) return twice;
  const body = bodyOf(rt.node, mergeWriteOnly(rt.node, config, config));
  if (!hasUnknown(body)) {
    const r = normalizeDesired(rt.kind, body);
    return r.ok ? [] : r.issues.map((i) => issueDiagnostic(rt.node, i));
  }
  const out: Diagnostic[] = [];
  for (const [name, value] of Object.entries(body)) {
    const field = rt.kind.fields[name];
    if (!field || hasUnknown(value)) continue;
    const r = field.safeParse(value);
    if (!r.success) out.push(...r.error.issues.map((i) => issueDiagnostic(rt.node, i, [name])));
  }
  return out;
}

// ------------------------------------------------------------------------- state from API

/** An attribute's value in a read form (Refs become ids). */
function liveValue(a: AttrNode, live: Doc | null | undefined): unknown {
  const v = live?.[a.readKey];
  if (v == null) return null;
  if (a.readsRef) return Array.isArray(v) ? v.map((r: Doc) => r.id) : v.id;
  return v;
}

/**
 * The state of an object from the server's read form. `base` is the planned state after an
 * apply (its known values win, as terraform requires) or the prior state on a read (its
 * values win where they normalise equal to the server's, and it keeps what the API never
 * returns: write-only values and once-only tokens).
 */
export function stateFrom(node: ObjectNode, live: Doc | null | undefined, base: Doc | null | undefined, mode: 'apply' | 'read'): Doc {
  const out: Doc = {};
  for (const a of node.attributes) {
    const b = hasUnknown(base?.[a.name]) ? undefined : base?.[a.name];
    const l = liveValue(a, live);
    if (a.writeOnlyOf) out[a.name] = null;
    else if (mode === 'apply' && b !== undefined) out[a.name] = b;
    else if (a.keep === 'config') out[a.name] = b ?? null;
    else if (a.keep === 'prior' || a.role === 'parent') out[a.name] = b ?? l;
    else if (a.role === 'input' && a.field) out[a.name] = preferDeclared(a.field, b, l);
    else out[a.name] = l;
  }
  for (const blk of node.blocks) {
    const l = live?.[blk.name];
    const b = base?.[blk.name];
    if (blk.nesting === 'single') {
      const present = mode === 'apply' && !isUnknown(b) ? b != null : l != null;
      out[blk.name] = present ? stateFrom(blk.block, l, isUnknown(b) ? null : b, mode) : null;
    } else {
      const items: Doc[] = mode === 'apply' && Array.isArray(b) ? b : (l ?? []);
      out[blk.name] = items.map((_, i) => stateFrom(blk.block, l?.[i], Array.isArray(b) ? b[i] : null, mode));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------- apply

export interface Outcome {
  state: Doc | null;
  diagnostics: Diagnostic[];
}

const failed = (rt: ResourceType, what: string, e: unknown, state: Doc | null = null): Outcome => ({
  state,
  diagnostics: [failureDiagnostic(rt.node, what, e)],
});

const parentOf = (rt: ResourceType, state: Doc | null | undefined) => {
  const p = parentAttr(rt.node);
  return p ? (state?.[p.name] as string) : undefined;
};

export async function applyChange(client: ApiClient, rt: ResourceType, prior: Doc | null, planned: Doc | null, config: Doc | null = null): Promise<Outcome> {
  // What is sent carries the write-only values of the configuration; the state never does.
  const sending = mergeWriteOnly(rt.node, planned, config);
  const label = `${rt.typeName}`;
  if (planned == null) {
    try {
      // A resource that is already gone counts as deleted.
      await client.delete(rt.kind, prior!.id, parentOf(rt, prior));
      return { state: null, diagnostics: [] };
    } catch (e) {
      return failed(rt, `Deleting ${label} ${prior!.id}`, e, prior);
    }
  }
  if (prior == null) {
    try {
      const live = await client.create(rt.kind, bodyOf(rt.node, sending, { send: true }), parentOf(rt, planned));
      return { state: stateFrom(rt.node, live, planned, 'apply'), diagnostics: [] };
    } catch (e) {
      return failed(rt, `Creating ${label}`, e);
    }
  }
  const id = prior.id as string;
  const parentId = parentOf(rt, prior);
  const patch: Doc = {};
  const removedModules: string[] = [];
  for (const a of rt.node.attributes) {
    if (a.writeOnlyOf) continue;
    // A new version of a write-only value sends the value (from the configuration) again.
    if (a.versionOf) {
      if (!equal(planned[a.name], prior[a.name]) && sending?.[a.versionOf] != null) patch[a.versionOf] = sending[a.versionOf];
      continue;
    }
    // Immutable values only differ here when adopted after an import (see planObject).
    if (a.role !== 'input' || a.replace || isUnknown(planned[a.name]) || equal(planned[a.name], prior[a.name])) continue;
    patch[a.name] = planned[a.name];
  }
  for (const b of rt.node.blocks) {
    const p = planned[b.name];
    const q = prior[b.name];
    const body = (v: Doc | Doc[] | null, opts: BodyOptions) => (v == null ? null : b.nesting === 'single' ? bodyOf(b.block, v as Doc, opts) : (v as Doc[]).map((e) => bodyOf(b.block, e, opts)));
    if (equal(body(p, { send: true, versions: true }), body(q, { send: true, versions: true }))) continue;
    if (p == null && b.module) removedModules.push(b.name);
    else patch[b.name] = body(sending?.[b.name] ?? p, { send: true });
  }
  try {
    // Removals first: a route carries at most one authentication module, so switching
    // from one to another must drop the old one before the new one arrives.
    for (const name of removedModules) await client.deleteModule(rt.kind, name, id, parentId);
    const live = Object.keys(patch).length ? await client.update(rt.kind, id, patch, parentId) : await client.get(rt.kind, id, parentId);
    if (!live) return { state: null, diagnostics: [error(`${label} ${id} disappeared during the update`, 'It was deleted outside Terraform; plan again to create it.')] };
    return { state: stateFrom(rt.node, live, planned, 'apply'), diagnostics: [] };
  } catch (e) {
    return failed(rt, `Updating ${label} ${id}`, e, prior);
  }
}

// ------------------------------------------------------------------------- read and import

export async function readState(client: ApiClient, rt: ResourceType, prior: Doc | null): Promise<Outcome> {
  if (!prior) return { state: null, diagnostics: [] };
  try {
    const live = await client.get(rt.kind, prior.id, parentOf(rt, prior));
    // Deleted outside Terraform: dropping it from the state makes the next plan create it.
    return { state: live ? stateFrom(rt.node, live, prior, 'read') : null, diagnostics: [] };
  } catch (e) {
    return failed(rt, `Reading ${rt.typeName} ${prior.id}`, e, prior);
  }
}

/**
 * Import ids: the resource id, or `<parent id>/<id>` for kinds that live under their
 * parent's path (a route: `<edge id>/<route id>`).
 */
export function parseImportId(rt: ResourceType, text: string): { id: string; parentId?: string } | Diagnostic {
  const parent = parentAttr(rt.node);
  const parts = text.split('/');
  const prefix = `${rt.kind.prefix}_`;
  if (parent) {
    if (parts.length !== 2 || !parts[1].startsWith(prefix)) {
      return error(`Invalid import id "${text}"`, `${rt.typeName} imports by "<${parent.name}>/<id>", e.g. "${kindOf(rt.kind.parent!.kind).prefix}_…/${prefix}…".`);
    }
    return { parentId: parts[0], id: parts[1] };
  }
  if (parts.length !== 1 || !text.startsWith(prefix)) return error(`Invalid import id "${text}"`, `${rt.typeName} imports by its id, which starts with ${prefix}.`);
  return { id: text };
}

export async function importState(client: ApiClient, rt: ResourceType, text: string): Promise<Outcome> {
  const parsed = parseImportId(rt, text);
  if ('severity' in parsed) return { state: null, diagnostics: [parsed] };
  try {
    const live = await client.get(rt.kind, parsed.id, parsed.parentId);
    if (!live) return { state: null, diagnostics: [error(`Cannot import ${rt.typeName} "${text}"`, 'No such resource exists on the server.')] };
    return { state: stateFrom(rt.node, live, null, 'read'), diagnostics: [] };
  } catch (e) {
    return failed(rt, `Importing ${rt.typeName} ${text}`, e);
  }
}
