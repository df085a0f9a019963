// The provider schema, walked from the catalog: one resource type per kind that can be
// created, attributes and blocks derived from the zod schemas and their traits. No kind
// or field is named here; the tables below say how each zod type and trait maps.
import { z } from 'zod';
import { catalog, type KindEntry } from '../catalog/index.js';
import { defOf, hasDefault, isOptional, shapeOf, traitsOf, unwrap } from '../catalog/traits.js';
import type { CtyType } from './cty.js';

export const PROVIDER_NAME = 'edgeform';
export const PROVIDER_SOURCE = 'edgeform/edgeform';

/** What an attribute holds, which decides how plan, apply and read treat it. */
export type Role =
  /** A create-body field: configured, normalised, compared. */
  | 'input'
  /** Set by the server. */
  | 'computed'
  /** The parent id of a kind nested in its parent's path (a route's edge_id). */
  | 'parent';

export interface AttrNode {
  name: string;
  type: CtyType;
  role: Role;
  required: boolean;
  optional: boolean;
  computed: boolean;
  sensitive: boolean;
  description: string;
  /** The input field's schema: normalises values for comparison and fills defaults. */
  field?: z.ZodType;
  /** The read form's key (`backend_id` reads as `backend`, a Ref or a list of Refs). */
  readKey: string;
  readsRef?: boolean;
  /**
   * Where the state's value comes from when the server cannot say: `config` for write-only
   * values (the API returns null), `prior` for values returned once (tokens).
   */
  keep?: 'config' | 'prior';
  /** A change replaces the resource. */
  replace?: boolean;
  /** Unset in config, the server picks it (kept from state, unknown on create). */
  serverDefault?: boolean;
  /** No in-place update changes it (id, uri, created_at, and computed fields with the `stable` trait). */
  stable?: boolean;
  /** Changes only with these attributes (computed fields with the `follows` trait). */
  follows?: readonly string[];
  /**
   * Terraform 1.11 write-only arguments for a secret X: `X_wo` (never in the plan or state;
   * sent as X) and `X_wo_version` (in the state; a change sends X_wo again). Names X.
   */
  writeOnlyOf?: string;
  versionOf?: string;
  /** A secret the catalog requires, made optional because its `_wo` twin may stand for it. */
  requiredOrWo?: boolean;
}

export interface BlockNode {
  name: string;
  nesting: 'single' | 'list';
  block: ObjectNode;
  field: z.ZodType;
  /** A module: removing it is the module's DELETE, not a PATCH. */
  module: boolean;
  minItems: number;
  maxItems: number;
  description: string;
}

export interface ObjectNode {
  attributes: AttrNode[];
  blocks: BlockNode[];
}

export interface ResourceType {
  typeName: string;
  kind: KindEntry;
  node: ObjectNode;
  type: CtyType;
}

function descriptionOf(schema: z.ZodType): string {
  let s: z.ZodType | undefined = schema;
  while (s) {
    if (s.description) return s.description;
    const d = defOf(s);
    s = d.innerType ?? d.in;
  }
  return '';
}

/** Terraform types by zod type; every zod type the catalog uses has a row. */
const CTY: Record<string, (s: z.ZodType) => CtyType> = {
  string: () => 'string',
  enum: () => 'string',
  literal: (s) => {
    const v = (defOf(s) as unknown as { values: unknown[] }).values[0];
    return typeof v === 'number' ? 'number' : typeof v === 'boolean' ? 'bool' : 'string';
  },
  number: () => 'number',
  boolean: () => 'bool',
  null: () => 'string',
  array: (s) => ['list', ctyOf((defOf(s) as unknown as { element: z.ZodType }).element)],
  record: (s) => ['map', ctyOf((defOf(s) as unknown as { valueType: z.ZodType }).valueType)],
  object: (s) => ['object', Object.fromEntries(Object.entries(shapeOf(s)!).map(([k, v]) => [k, ctyOf(v)]))],
};

export function ctyOf(schema: z.ZodType): CtyType {
  const base = unwrap(schema);
  const row = CTY[defOf(base).type];
  if (!row) throw new Error(`no Terraform type for zod type ${defOf(base).type}; add a row to CTY in provider/terraform/schema.ts`);
  return row(base);
}

/** The object shape of list elements, if the schema is a list of objects. */
function elementShape(schema: z.ZodType): Record<string, z.ZodType> | undefined {
  const d = defOf(unwrap(schema)) as unknown as { type: string; element?: z.ZodType };
  return d.type === 'array' && d.element ? shapeOf(d.element) : undefined;
}

export function computedAttr(name: string, schema: z.ZodType, extra: Partial<AttrNode> = {}): AttrNode {
  const t = traitsOf(schema);
  return {
    name,
    type: ctyOf(schema),
    role: 'computed',
    required: false,
    optional: false,
    computed: true,
    sensitive: Boolean(t.once || t.writeOnly),
    description: descriptionOf(schema),
    readKey: name,
    ...(t.once ? { keep: 'prior' as const } : {}),
    ...(t.stable ? { stable: true } : {}),
    ...(t.follows ? { follows: t.follows } : {}),
    ...extra,
  };
}

function inputAttr(name: string, schema: z.ZodType): AttrNode {
  const t = traitsOf(schema);
  const required = !isOptional(schema) && !hasDefault(schema);
  const readsRef = Boolean(t.ref && !t.ref.inKeys && t.ref.readAs);
  return {
    name,
    type: ctyOf(schema),
    role: 'input',
    required,
    // Optional values are also computed: the plan fills the server's default (from the
    // catalog), so dropping a value from the configuration resets it.
    optional: !required,
    computed: !required,
    sensitive: Boolean(t.writeOnly || t.once),
    description: descriptionOf(schema),
    field: schema,
    readKey: readsRef ? t.ref!.readAs! : name,
    ...(readsRef ? { readsRef } : {}),
    ...(t.writeOnly ? { keep: 'config' as const } : {}),
    ...(t.replace ? { replace: true } : {}),
    ...(t.serverDefault ? { serverDefault: true } : {}),
  };
}

/**
 * The write-only pair of a secret: with them the secret stays out of Terraform's state and
 * plan files altogether. The secret itself becomes optional (one of the two is checked in
 * resource.ts, where the configuration is seen whole).
 */
function writeOnlyPair(secret: AttrNode): AttrNode[] {
  if (secret.required) Object.assign(secret, { required: false, optional: true, computed: true, requiredOrWo: true });
  return [
    {
      name: `${secret.name}_wo`, type: secret.type, role: 'input', required: false, optional: true, computed: false, sensitive: true, readKey: `${secret.name}_wo`,
      description: `${secret.description} Write-only (Terraform 1.11+): never stored in the state or a plan; instead of ${secret.name}. Change ${secret.name}_wo_version to send a new value.`,
      writeOnlyOf: secret.name,
    },
    {
      name: `${secret.name}_wo_version`, type: 'number', role: 'input', required: false, optional: true, computed: false, sensitive: false, readKey: `${secret.name}_wo_version`,
      description: `Any number; changing it sends ${secret.name}_wo again (a write-only value cannot be compared).`,
      versionOf: secret.name, keep: 'prior',
    },
  ];
}

/** The node of an input object shape; `read` adds the read form's extra (computed) keys. */
export function objectNode(shape: Record<string, z.ZodType>, read: Record<string, z.ZodType> = {}): ObjectNode {
  const node: ObjectNode = { attributes: [], blocks: [] };
  for (const [name, schema] of Object.entries(shape)) {
    const t = traitsOf(schema);
    if (t.computed) {
      node.attributes.push(computedAttr(name, schema));
      continue;
    }
    const sub = shapeOf(schema);
    const elements = elementShape(schema);
    const readSchema = read[name];
    if (sub) {
      node.blocks.push({
        name, nesting: 'single', block: objectNode(sub, (readSchema && shapeOf(readSchema)) || {}), field: schema,
        module: Boolean(t.module), minItems: isOptional(schema) ? 0 : 1, maxItems: isOptional(schema) ? 0 : 1, description: descriptionOf(schema),
      });
    } else if (elements) {
      const d = defOf(unwrap(schema)) as unknown as { checks?: { _zod: { def: { check: string; minimum?: number; maximum?: number } } }[] };
      const bound = (check: string, key: 'minimum' | 'maximum') => d.checks?.map((c) => c._zod.def).find((c) => c.check === check)?.[key] ?? 0;
      node.blocks.push({
        name, nesting: 'list', block: objectNode(elements, (readSchema && elementShape(readSchema)) || {}), field: schema,
        module: false, minItems: bound('min_length', 'minimum'), maxItems: bound('max_length', 'maximum'), description: descriptionOf(schema),
      });
    } else {
      const a = inputAttr(name, schema);
      node.attributes.push(a);
      if (a.keep === 'config') node.attributes.push(...writeOnlyPair(a));
    }
  }
  for (const [name, schema] of Object.entries(read)) {
    if (!(name in shape)) node.attributes.push(computedAttr(name, schema));
  }
  return node;
}

/** The Terraform value type of an object node (attributes and blocks). */
export function objectType(node: ObjectNode): CtyType {
  const fields: Record<string, CtyType> = {};
  for (const a of node.attributes) fields[a.name] = a.type;
  for (const b of node.blocks) fields[b.name] = b.nesting === 'single' ? objectType(b.block) : ['list', objectType(b.block)];
  return ['object', fields];
}

function resourceNode(kind: KindEntry): ObjectNode {
  const common = kind.read.shape;
  const stable = (name: string) => computedAttr(name, common[name] as z.ZodType, { stable: true });
  const top: AttrNode[] = [stable('id'), stable('uri'), stable('created_at')];
  const parent = kind.parent;
  if (parent?.in === 'path') {
    top.push({
      name: parent.field, type: 'string', role: 'parent', required: true, optional: false, computed: false, sensitive: false,
      description: `Id of the parent ${parent.kind}; changing it replaces the resource.`, readKey: parent.field, replace: true,
    });
  }
  const body = objectNode(kind.fields, (kind.spec.readOverrides ?? {}) as Record<string, z.ZodType>);
  // Children embedded in the read form (an edge's routes) are resources of their own.
  const embedded = new Set(catalog.filter((k) => k.parent?.kind === kind.kind && k.parent.embedded).map((k) => k.parent!.nestAs));
  const computed = Object.entries(kind.spec.computed ?? {})
    .filter(([name]) => !embedded.has(name))
    .map(([name, schema]) => computedAttr(name, schema as z.ZodType));
  return { attributes: [...top, ...body.attributes, ...computed], blocks: body.blocks };
}

export const resourceTypeName = (kind: KindEntry) => `${PROVIDER_NAME}_${kind.type}`;

/** Every resource type, in catalog order (referenced kinds first). */
export const resourceTypes: ResourceType[] = catalog
  .filter((k) => k.operations.includes('create'))
  .map((kind) => {
    const node = resourceNode(kind);
    return { typeName: resourceTypeName(kind), kind, node, type: objectType(node) };
  });

export const resourceType = (typeName: string) => resourceTypes.find((r) => r.typeName === typeName);

/** The provider block's own configuration. */
export const providerNode: ObjectNode = {
  attributes: [
    {
      name: 'api_url', type: 'string', role: 'input', required: false, optional: true, computed: false, sensitive: false, readKey: 'api_url',
      description: 'Base URL of the edgeform API, e.g. http://127.0.0.1:8080. Defaults to the EDGEFORM_API_URL environment variable.',
    },
    {
      name: 'api_key', type: 'string', role: 'input', required: false, optional: true, computed: false, sensitive: true, readKey: 'api_key',
      description: 'API key (bearer token). Defaults to the EDGEFORM_API_KEY environment variable.',
    },
  ],
  blocks: [],
};
export const providerType = objectType(providerNode);
