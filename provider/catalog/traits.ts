// Field traits: what a field means beyond its type. Shared code asks these instead of
// naming kinds or fields (STYLE.md). Traits live in a zod registry keyed by schema
// instance, so every helper below makes a fresh schema.
import { z } from 'zod';

/** What deleting the target of a reference does to the referrer. */
export type OnDelete = 'restrict' | 'keep' | 'cascade';

export interface RefTrait {
  /** Catalog kinds the id may name. */
  to: readonly string[];
  /** The read form's name for the field: `backend_id` reads as `backend` (a Ref). Without it the read form keeps the name and the plain id. */
  readAs?: string;
  onDelete: OnDelete;
  /** The ids are the keys of a map (a weighted backend's `backends`), not the values. */
  inKeys?: boolean;
  /** Following this field from resource to resource must never lead back to the start (no cycles). */
  acyclic?: true;
}

export interface Traits {
  /** Never returned: `null` keeps the key with a null value, `omit` leaves it out. */
  writeOnly?: 'null' | 'omit';
  /** Cannot change after creation: PATCH refuses it and plans replace the resource. */
  replace?: true;
  ref?: RefTrait;
  /**
   * Values unique within a scope; a list field makes each element a key. `key` maps a value to
   * the form compared (an SSH public key without its comment), when spellings differ.
   */
  unique?: { scope: string; perParent?: boolean; what: string; key?: (value: string) => string };
  /** A module: optional object, null when unset, with its own PUT/GET/DELETE path. */
  module?: true;
  /** Server-set value; present in the read form only. */
  computed?: true;
  /** A server-set value no in-place update changes (derived from fields that force replacement, or constant): plans keep it from state. */
  stable?: true;
  /** A server-set value derived from these body fields alone: plans keep it from state while they do not change. */
  follows?: readonly string[];
  /** Returned once (in the creation response) and null afterwards. */
  once?: true;
  /** Optional input whose default the server picks at creation (a timestamp, say); plans ignore it when unset. */
  serverDefault?: true;
  /** Natural key of a child within its parent (route `match`, rule `cidr`). */
  naturalKey?: true;
}

export const traits = z.registry<Traits>();

/** Attaches traits to a schema (merging with any it has) and returns it. */
export function withTraits<T extends z.ZodType>(schema: T, t: Traits): T {
  const prior = traits.get(schema);
  if (prior) traits.remove(schema);
  return (schema as z.ZodType).register(traits, { ...prior, ...t } as never) as T;
}

type Def = { type: string; innerType?: z.ZodType; in?: z.ZodType; out?: z.ZodType; getter?: () => z.ZodType };
export const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** Wrappers that do not change what a field is. */
const wrappers = new Set(['optional', 'nullable', 'default', 'prefault', 'readonly', 'catch', 'nonoptional']);

/** The schema beneath optional/nullable/default wrappers and the input side of pipes. */
export function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    const d = defOf(s);
    if (wrappers.has(d.type) && d.innerType) s = d.innerType;
    else if (d.type === 'pipe' && d.in) s = d.in;
    else if (d.type === 'lazy' && d.getter) s = d.getter();
    else return s;
  }
}

/** All traits found on a schema and its wrappers, outermost last. */
export function traitsOf(schema: z.ZodType): Traits {
  let s = schema;
  let found: Traits = {};
  for (;;) {
    const t = traits.get(s);
    if (t) found = { ...t, ...found };
    const d = defOf(s);
    if (wrappers.has(d.type) && d.innerType) s = d.innerType;
    else if (d.type === 'pipe' && d.in) s = d.in;
    else return found;
  }
}

export const isOptional = (schema: z.ZodType): boolean => {
  const t = defOf(schema).type;
  return t === 'optional' || t === 'default' || t === 'prefault' || (t === 'nullable' && isOptional(defOf(schema).innerType!));
};

export const hasDefault = (schema: z.ZodType): boolean => {
  let s = schema;
  for (;;) {
    const d = defOf(s);
    if (d.type === 'default' || d.type === 'prefault') return true;
    if (wrappers.has(d.type) && d.innerType) s = d.innerType;
    else return false;
  }
};

/** The schema with its outer default removed, so an absent value stays absent (PATCH). */
export function withoutDefault(schema: z.ZodType): z.ZodType {
  const d = defOf(schema);
  if ((d.type === 'default' || d.type === 'prefault') && d.innerType) return withoutDefault(d.innerType);
  if (d.type === 'optional' || d.type === 'nullable') {
    const inner = withoutDefault(d.innerType!);
    return inner === d.innerType ? schema : d.type === 'optional' ? inner.optional() : inner.nullable();
  }
  return schema;
}

/**
 * The schema of field `key` in a shape, only if the shape declares it: a plain lookup of
 * a client's key such as `toString` or `constructor` finds Object.prototype's function.
 */
export const fieldOf = (shape: Record<string, z.ZodType>, key: PropertyKey): z.ZodType | undefined =>
  Object.hasOwn(shape, key) ? shape[key as string] : undefined;

/** Object shape of an (unwrapped) object schema, or undefined. */
export function shapeOf(schema: z.ZodType): Record<string, z.ZodType> | undefined {
  const s = unwrap(schema);
  return defOf(s).type === 'object' ? (s as z.ZodObject).shape : undefined;
}
