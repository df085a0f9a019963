// Generic walks over a document and its schema, driven by traits. The server uses them to
// split secrets out, find references and shape responses; the reconciler and the provider
// use them to turn read forms back into input forms.
import { z } from 'zod';
import { readKey } from './define.js';
import { defOf, fieldOf, hasDefault, shapeOf, traitsOf, unwrap, type RefTrait } from './traits.js';

type Doc = Record<string, any>;
export type Path = (string | number)[];

export const pathText = (path: Path) =>
  path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');

function elementOf(schema: z.ZodType): z.ZodType | undefined {
  const s = unwrap(schema);
  const d = defOf(s) as unknown as { type: string; element?: z.ZodType; valueType?: z.ZodType };
  return d.type === 'array' ? d.element : undefined;
}

function recordValueOf(schema: z.ZodType): z.ZodType | undefined {
  const s = unwrap(schema);
  const d = defOf(s) as unknown as { type: string; valueType?: z.ZodType };
  return d.type === 'record' ? d.valueType : undefined;
}

export interface FoundRef { path: string; ids: string[]; ref: RefTrait }

/** Every reference in a document (input form). */
export function collectRefs(shape: Record<string, z.ZodType>, doc: Doc, base: Path = []): FoundRef[] {
  const out: FoundRef[] = [];
  for (const [name, schema] of Object.entries(shape)) {
    const value = doc?.[name];
    if (value == null) continue;
    const t = traitsOf(schema);
    const path = [...base, name];
    if (t.ref) {
      const ids = t.ref.inKeys ? Object.keys(value) : Array.isArray(value) ? value : [value];
      out.push({ path: pathText(path), ids, ref: t.ref });
      continue;
    }
    const sub = shapeOf(schema);
    if (sub) out.push(...collectRefs(sub, value, path));
    const el = elementOf(schema);
    const elShape = el && shapeOf(el);
    if (elShape && Array.isArray(value)) value.forEach((v, i) => out.push(...collectRefs(elShape, v, [...path, i])));
  }
  return out;
}

/** Every reference a schema can hold, whatever a document puts in it. */
export function refTraitsOf(shape: Record<string, z.ZodType>): RefTrait[] {
  return Object.values(shape).flatMap((schema) => {
    const ref = traitsOf(schema).ref;
    if (ref) return [ref];
    const el = elementOf(schema);
    const sub = shapeOf(schema) ?? (el && shapeOf(el));
    return sub ? refTraitsOf(sub) : [];
  });
}

/**
 * A copy of a document with every reference id replaced by `fn` (input form). The reconciler
 * swaps `Kind/name` references for ids, and back, with it.
 */
export function mapRefs(shape: Record<string, z.ZodType>, doc: Doc, fn: (id: string, ref: RefTrait, path: Path) => string, base: Path = []): Doc {
  if (doc == null || typeof doc !== 'object' || Array.isArray(doc)) return doc;
  const out: Doc = { ...doc };
  for (const [name, schema] of Object.entries(shape)) {
    const value = doc[name];
    if (value == null) continue;
    const t = traitsOf(schema);
    const path = [...base, name];
    if (t.ref) {
      const one = (v: unknown, p: Path) => (typeof v === 'string' ? fn(v, t.ref!, p) : v);
      if (t.ref.inKeys && typeof value === 'object' && !Array.isArray(value)) out[name] = Object.fromEntries(Object.entries(value).map(([k, v]) => [one(k, [...path, k]), v]));
      else out[name] = Array.isArray(value) ? value.map((v, i) => one(v, [...path, i])) : one(value, path);
      continue;
    }
    const sub = shapeOf(schema);
    if (sub && typeof value === 'object' && !Array.isArray(value)) { out[name] = mapRefs(sub, value, fn, path); continue; }
    const el = elementOf(schema);
    const elShape = el && shapeOf(el);
    if (elShape && Array.isArray(value)) out[name] = value.map((v, i) => mapRefs(elShape, v, fn, [...path, i]));
  }
  return out;
}

/** Splits write-only values out of a document: `[public, secrets]`, secrets keyed by path. */
export function splitSecrets(shape: Record<string, z.ZodType>, doc: Doc): [Doc, Record<string, unknown>] {
  const secrets: Record<string, unknown> = {};
  const strip = (sh: Record<string, z.ZodType>, d: Doc, base: Path): Doc => {
    const out: Doc = {};
    for (const [k, v] of Object.entries(d)) {
      const schema = sh[k];
      if (!schema) { out[k] = v; continue; }
      const path = [...base, k];
      if (traitsOf(schema).writeOnly) {
        if (v !== undefined && v !== null) secrets[pathText(path)] = v;
        continue;
      }
      const sub = shapeOf(schema);
      const el = elementOf(schema);
      const elShape = el && shapeOf(el);
      const recShape = recordValueOf(schema) && shapeOf(recordValueOf(schema)!);
      if (sub && v && typeof v === 'object' && !Array.isArray(v)) out[k] = strip(sub, v, path);
      else if (elShape && Array.isArray(v)) out[k] = v.map((e, i) => (e && typeof e === 'object' ? strip(elShape, e, [...path, i]) : e));
      else if (recShape && v && typeof v === 'object') out[k] = Object.fromEntries(Object.entries(v).map(([rk, rv]) => [rk, strip(recShape, rv as Doc, [...path, rk])]));
      else out[k] = v;
    }
    return out;
  };
  return [strip(shape, doc, []), secrets];
}

/** Puts secrets (keyed by path) back into a document. */
export function mergeSecrets(doc: Doc, secrets: Record<string, unknown>): Doc {
  const out = structuredClone(doc);
  for (const [path, value] of Object.entries(secrets)) {
    const parts = path.match(/[^.[\]]+/g) ?? [];
    let cur: any = out;
    for (let i = 0; i < parts.length - 1; i++) {
      const key = /^\d+$/.test(parts[i]) ? Number(parts[i]) : parts[i];
      if (cur[key] == null || typeof cur[key] !== 'object') { cur = undefined; break; }
      cur = cur[key];
    }
    if (cur) cur[parts.at(-1)!] = value;
  }
  return out;
}

export interface ReadContext {
  /** The absolute uri of a resource id, or undefined if its kind is unknown. */
  uriOf(id: string): string;
}

/** The read form of a stored input-form document's body fields. */
export function toReadFields(shape: Record<string, z.ZodType>, doc: Doc, ctx: ReadContext): Doc {
  return readerOf(shape)(doc, ctx);
}

type Reader = (doc: Doc, ctx: ReadContext) => Doc;
const readers = new WeakMap<Record<string, z.ZodType>, Reader>();

/**
 * toReadFields for one shape, its traits looked up once: a page of 100 read every field's
 * traits per row, a quarter of the page's CPU (bench/README.md, "The API's hot path").
 */
function readerOf(shape: Record<string, z.ZodType>): Reader {
  const cached = readers.get(shape);
  if (cached) return cached;
  type Step = (doc: Doc, out: Doc, ctx: ReadContext) => void;
  const steps: Step[] = [];
  for (const [name, schema] of Object.entries(shape)) {
    const t = traitsOf(schema);
    if (t.writeOnly === 'omit') continue;
    const key = readKey(name, schema);
    if (t.writeOnly) { steps.push((_doc, out) => { out[key] = null; }); continue; }
    const list = elementOf(schema) !== undefined;
    if (t.ref && !t.ref.inKeys && t.ref.readAs) {
      steps.push((doc, out, ctx) => {
        const value = doc?.[name];
        const asRef = (id: string) => ({ id, uri: ctx.uriOf(id) });
        out[key] = Array.isArray(value) ? value.map(asRef) : value == null ? (list ? [] : null) : asRef(value);
      });
      continue;
    }
    const sub = shapeOf(schema);
    if (sub) {
      const read = readerOf(sub);
      steps.push((doc, out, ctx) => { const value = doc?.[name]; out[key] = value == null ? null : read(value, ctx); });
      continue;
    }
    const el = elementOf(schema);
    const elShape = el && shapeOf(el);
    const readEl = elShape ? readerOf(elShape) : undefined;
    const withDefault = hasDefault(schema);
    steps.push((doc, out, ctx) => {
      const value = doc?.[name];
      if (readEl && Array.isArray(value)) { out[key] = value.map((v) => readEl(v, ctx)); return; }
      // A field added to a kind after the resource was stored (a bot's metadata) reads as its default.
      out[key] = value === undefined ? (withDefault ? (schema.safeParse(undefined).data ?? null) : null) : value;
    });
  }
  const reader: Reader = (doc, ctx) => {
    const out: Doc = {};
    for (const step of steps) step(doc, out, ctx);
    return out;
  };
  readers.set(shape, reader);
  return reader;
}

/**
 * The input form of a read form's body fields: Refs become ids, computed and write-only
 * fields are dropped, and keys the input does not have (a source's uri) are left out.
 */
export function fromReadFields(shape: Record<string, z.ZodType>, read: Doc): Doc {
  const out: Doc = {};
  for (const [name, schema] of Object.entries(shape)) {
    const t = traitsOf(schema);
    if (t.writeOnly || t.computed) continue;
    const value = read?.[readKey(name, schema)];
    // Absent and null read the same for optional input fields; only modules keep an explicit null.
    if (value === undefined || (value === null && !t.module)) continue;
    if (t.ref && !t.ref.inKeys && t.ref.readAs) {
      out[name] = Array.isArray(value) ? value.map((r: { id: string }) => r.id) : value == null ? value : value.id;
      continue;
    }
    const sub = shapeOf(schema);
    if (sub) { out[name] = value == null ? null : fromReadFields(sub, value); continue; }
    const el = elementOf(schema);
    const elShape = el && shapeOf(el);
    if (elShape && Array.isArray(value)) { out[name] = value.map((v) => fromReadFields(elShape, v)); continue; }
    out[name] = value;
  }
  return out;
}

/** The schema found by following a path (object keys, list indexes, map keys) from a root. */
export function schemaAt(root: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let cur: z.ZodType | undefined = root;
  for (const step of path) {
    if (!cur) return undefined;
    const shape = shapeOf(cur);
    const field = shape && typeof step === 'string' ? fieldOf(shape, step) : undefined;
    if (field) { cur = field; continue; }
    const el = elementOf(cur);
    if (el && typeof step === 'number') { cur = el; continue; }
    const rv = recordValueOf(cur);
    if (rv) { cur = rv; continue; }
    return undefined;
  }
  return cur;
}
