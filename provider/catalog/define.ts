// A catalog entry: everything that is true of one resource kind. The server, client,
// reconciler, Terraform provider and generated documents all read these entries.
import { z } from 'zod';
import { prefixOfKind, ref } from './fields.js';
import { defOf, fieldOf, hasDefault, isOptional, shapeOf, traitsOf, withoutDefault, type Traits } from './traits.js';

export type Operation = 'create' | 'read' | 'list' | 'update' | 'delete';

export interface ParentSpec {
  /** The parent kind. */
  kind: string;
  /** The field holding the parent id: in the body (`ip_policy_id`) or the path (`edge_id`). */
  field: string;
  /** Where the parent id comes from on create. */
  in: 'body' | 'path';
  /** The children's name when nested in the parent (manifest key, and the parent's read form when embedded). */
  nestAs: string;
  /** Children appear inside the parent's read form, oldest first. */
  embedded?: boolean;
}

/** Cross-field rules over a whole (create-form) document. */
export type Refinement = (doc: Record<string, any>, ctx: z.RefinementCtx) => void;

export interface KindSpec {
  /** Manifest kind, e.g. `IPPolicy`. */
  kind: string;
  /** Snake-case name: Terraform type suffix and event type prefix, e.g. `ip_policy`. */
  type: string;
  /** Id prefix without the underscore. */
  prefix: string;
  /** Collection path; may contain `{parent_field}`. */
  path: string;
  /** List envelope key; absent when there is no list endpoint. */
  envelope?: string;
  parent?: ParentSpec;
  operations: readonly Operation[];
  /** Create-body fields (with traits). Modules are fields with the `module` trait. */
  body?: z.ZodRawShape;
  /** Server-set fields of the read form beyond id, uri and created_at. */
  computed?: z.ZodRawShape;
  /** Read forms of body fields that the server enriches (a subscription's sources gain a uri). */
  readOverrides?: z.ZodRawShape;
  refine?: Refinement;
  /** Fills defaults that depend on other fields (runs after validation). */
  normalize?: (doc: Record<string, any>) => Record<string, any>;
  /** The reconciler's identity for top-level kinds without a parent, if they have one. */
  naturalKey?: string;
  /** Sub-resources the kind manages that are not catalog kinds (e.g. event delivery logs): no. Extra actions: */
  actions?: readonly string[];
  /** One-line summary for docs. */
  summary: string;
  /** Read-form fields with no value are left out instead of null (SPEC: a tunnel omits what does not apply). */
  omitUnset?: boolean;
  /** Emits `<type>_created|updated|deleted.v0` events. */
  events?: boolean;
  /**
   * Read forms of the kind's list that the API never changes (made by agents, not callers):
   * the reconciler, export and the Terraform provider leave them alone.
   */
  madeByAgents?: (read: Record<string, unknown>) => boolean;
}

export interface ModuleEntry {
  name: string;
  /** The bare module body, as PUT takes it. */
  schema: z.ZodType;
  /** The module's read form. */
  read: z.ZodType;
}

export interface KindEntry extends Required<Pick<KindSpec, 'kind' | 'type' | 'prefix' | 'path' | 'operations' | 'summary'>> {
  spec: KindSpec;
  envelope?: string;
  parent?: ParentSpec;
  naturalKey?: string;
  /** Validates and normalises a create body (defaults applied). */
  create: z.ZodType<Record<string, any>>;
  /** Validates a PATCH body: updatable fields, all optional, no defaults. */
  update: z.ZodType<Record<string, any>>;
  /** The read form. */
  read: z.ZodObject;
  /** Create-body fields by name. */
  fields: Record<string, z.ZodType>;
  /** Modules by name, in declaration order. */
  modules: Record<string, ModuleEntry>;
  /** Fields that cannot change after creation. */
  immutable: string[];
  traits(field: string): Traits;
}

export const isModule = (schema: z.ZodType) => traitsOf(schema).module === true;

/**
 * The read form of one field value schema: refs with a `readAs` name become Refs (refs
 * without one, like an API key's `owner_id`, read as the plain id), modules nullable,
 * secrets null.
 */
export function readSchemaOf(schema: z.ZodType): z.ZodType {
  const t = traitsOf(schema);
  const inner = schema;
  if (t.ref && !t.ref.inKeys && t.ref.readAs) {
    const isList = defOf(unwrapAll(inner)).type === 'array';
    return isList ? z.array(ref()) : ref().nullable();
  }
  const shape = shapeOf(inner);
  if (shape) {
    const obj = readObject(shape);
    return t.module || isOptional(inner) ? obj.nullable() : obj;
  }
  if (t.writeOnly) return z.null();
  // Server-set values are optional on input only because input never carries them; reads always do.
  if (t.computed) return unwrapAll(inner);
  return stripTransforms(inner);
}

function unwrapAll(s: z.ZodType): z.ZodType {
  let cur = s;
  for (;;) {
    const d = defOf(cur);
    if (['optional', 'nullable', 'default', 'prefault'].includes(d.type) && d.innerType) cur = d.innerType;
    else if (d.type === 'pipe' && d.in) cur = d.in;
    else return cur;
  }
}

/** The output type of a field, for documents: the input side without wrappers. */
function stripTransforms(s: z.ZodType): z.ZodType {
  const base = unwrapAll(s);
  return isOptional(s) && !hasDefault(s) ? base.nullable() : base;
}

/** The read-form key of a field (`backend_id` reads as `backend`). */
export const readKey = (name: string, schema: z.ZodType) => traitsOf(schema).ref?.readAs ?? name;

export function readObject(shape: z.ZodRawShape): z.ZodObject {
  const out: Record<string, z.ZodType> = {};
  for (const [name, schema] of Object.entries(shape)) {
    const t = traitsOf(schema as z.ZodType);
    if (t.writeOnly === 'omit') continue;
    out[readKey(name, schema as z.ZodType)] = readSchemaOf(schema as z.ZodType);
  }
  return z.object(out);
}

const common = () => ({
  id: z.string().describe('Unique identifier.'),
  uri: z.string().describe('Absolute URL of the resource.'),
  created_at: z.string().describe('RFC 3339 creation time, UTC.'),
});

export function defineKind(spec: KindSpec): KindEntry {
  prefixOfKind.set(spec.kind, spec.prefix);
  const body = spec.body ?? {};
  const fields = body as Record<string, z.ZodType>;
  const createObject = z.strictObject(body);
  const refined = spec.refine ? createObject.superRefine(spec.refine as never) : createObject;
  const normalize = spec.normalize;
  const create = (normalize ? refined.transform((d) => normalize(d as Record<string, any>)) : refined) as unknown as z.ZodType<Record<string, any>>;
  const immutable = Object.entries(fields).filter(([, s]) => traitsOf(s).replace).map(([k]) => k);
  const updateShape: Record<string, z.ZodType> = {};
  for (const [name, schema] of Object.entries(fields)) {
    if (immutable.includes(name)) continue;
    const s = withoutDefault(schema);
    updateShape[name] = (isModule(schema) ? s : s.optional()).optional().nullable();
  }
  const update = z.strictObject(updateShape) as unknown as z.ZodType<Record<string, any>>;
  const parentField: z.ZodRawShape = spec.parent?.in === 'path' ? { [spec.parent.field]: z.string() } : {};
  const read = z.object({ ...common(), ...parentField, ...readObject(body).shape, ...(spec.readOverrides ?? {}), ...(spec.computed ?? {}) });
  const modules: Record<string, ModuleEntry> = {};
  for (const [name, schema] of Object.entries(fields)) {
    if (!isModule(schema)) continue;
    const inner = unwrapModule(schema);
    modules[name] = { name, schema: inner, read: readSchemaOf(schema) };
  }
  return {
    kind: spec.kind,
    type: spec.type,
    prefix: spec.prefix,
    path: spec.path,
    operations: spec.operations,
    summary: spec.summary,
    envelope: spec.envelope,
    parent: spec.parent,
    naturalKey: spec.naturalKey,
    spec,
    create,
    update,
    read,
    fields,
    modules,
    immutable,
    traits: (field) => {
      const schema = fieldOf(fields, field);
      return schema ? traitsOf(schema) : {};
    },
  };
}

/** A module field is `optional(nullable(object))`; PUT takes the object. */
function unwrapModule(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    const d = defOf(s);
    if ((d.type === 'optional' || d.type === 'nullable') && d.innerType) s = d.innerType;
    else return s;
  }
}
