// Data sources: one per kind that can be looked up, walked from the catalog as resources
// are. Every value is computed; a few attributes are also lookups the configuration may set:
// `id`, the kind's natural key (an edge's hostports, a bot's name, a route's match, a rule's
// cidr), `metadata`, and the parent a child lives under. With `id` the lookup is one GET;
// otherwise the list is read and exactly one item must match, else a diagnostic says how
// many did and which attribute narrows it.
import type { ApiClient } from '../client/index.js';
import { catalog, kindOf, traitsOf, type KindEntry } from '../catalog/index.js';
import { isUnknown } from './cty.js';
import { error, failureDiagnostic, type Diagnostic } from './diagnostics.js';
import { stateFrom } from './resource.js';
import { computedAttr, objectType, resourceType, resourceTypeName, type AttrNode, type ObjectNode, type ResourceType } from './schema.js';

type Doc = Record<string, any>;

export interface DataSourceType {
  typeName: string;
  kind: KindEntry;
  node: ObjectNode;
  type: ReturnType<typeof objectType>;
  /** Attributes the configuration may set to pick the item (besides the required parent). */
  lookups: string[];
  /** The parent id attribute of a kind that lives under its parent's path (a route's edge_id). */
  parent?: string;
  resource?: ResourceType;
}

/** The kind-level natural key, or a field marked as the natural key within its parent. */
function naturalKeyOf(kind: KindEntry): string | undefined {
  if (kind.spec.naturalKey) return kind.spec.naturalKey;
  return Object.entries(kind.fields).find(([, s]) => traitsOf(s).naturalKey)?.[0];
}

const asLookup = (a: AttrNode): AttrNode => ({ ...a, optional: true, computed: true, required: false });
const asComputed = (a: AttrNode): AttrNode => ({ ...a, role: 'computed', optional: false, computed: true, required: false });

function dataSourceOf(kind: KindEntry): DataSourceType | undefined {
  if (!kind.operations.includes('read') || (!kind.envelope && !kind.parent?.embedded)) return undefined;
  const resource = resourceType(resourceTypeName(kind));
  const natural = naturalKeyOf(kind);
  const pathParent = kind.parent?.in === 'path' ? kind.parent.field : undefined;
  const bodyParent = kind.parent?.in === 'body' ? kind.parent.field : undefined;
  const lookups = ['id', ...(natural ? [natural] : []), ...(bodyParent ? [bodyParent] : []), ...('metadata' in kind.fields || 'metadata' in kind.read.shape ? ['metadata'] : [])];
  const attrs: AttrNode[] = [];
  if (resource) {
    for (const a of resource.node.attributes.filter((x) => !x.writeOnlyOf && !x.versionOf)) attrs.push(a.role === 'parent' ? { ...a, replace: false } : lookups.includes(a.name) ? asLookup(a) : asComputed(a));
    // Modules and lists of objects are blocks in a resource; here they are computed values.
    for (const b of resource.node.blocks) attrs.push({ ...computedAttr(b.name, b.field), type: b.nesting === 'single' ? objectType(b.block) : ['list', objectType(b.block)] });
  } else {
    for (const [name, schema] of Object.entries(kind.read.shape)) {
      const a = computedAttr(name, schema as never);
      attrs.push(lookups.includes(name) ? asLookup(a) : a);
    }
  }
  const node: ObjectNode = { attributes: attrs, blocks: [] };
  return { typeName: resourceTypeName(kind), kind, node, type: objectType(node), lookups, ...(pathParent ? { parent: pathParent } : {}), ...(resource ? { resource } : {}) };
}

export const dataSourceTypes: DataSourceType[] = catalog.map(dataSourceOf).filter((d): d is DataSourceType => d !== undefined);

export const dataSourceType = (typeName: string) => dataSourceTypes.find((d) => d.typeName === typeName);

/** The data source's value of one live item: the resource's state form, blocks as values. */
function valueOf(ds: DataSourceType, live: Doc): Doc {
  if (ds.resource) {
    const state = stateFrom(ds.resource.node, live, null, 'read');
    if (ds.parent) state[ds.parent] = live[ds.parent] ?? live.edge?.id ?? null;
    return state;
  }
  return Object.fromEntries(ds.node.attributes.map((a) => [a.name, live[a.name] ?? null]));
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Whether an item's value agrees with one lookup: equal, or for a list every configured element present. */
function matches(value: unknown, wanted: unknown): boolean {
  if (Array.isArray(wanted)) {
    const have = Array.isArray(value) ? value.map((v) => String(v).toLowerCase()) : [];
    return wanted.every((w) => have.includes(String(w).toLowerCase()));
  }
  return same(value, wanted);
}

export async function readDataSource(client: ApiClient, ds: DataSourceType, config: Doc | null): Promise<{ state: Doc | null; diagnostics: Diagnostic[] }> {
  const given = Object.fromEntries(ds.lookups.map((k) => [k, config?.[k]]).filter(([, v]) => v != null && !isUnknown(v) && !(Array.isArray(v) && v.length === 0)));
  const parentId = ds.parent ? (config?.[ds.parent] as string | undefined) : undefined;
  const what = ds.typeName;
  try {
    let candidates: Doc[];
    if (given.id) {
      const live = await client.get(ds.kind, given.id as string, parentId);
      if (!live) return { state: null, diagnostics: [error(`No ${what} with id ${given.id}`, 'Nothing on the server has that id; check it, or look the item up by another attribute.', ds.node, ['id'])] };
      candidates = [live];
    } else if (ds.parent) {
      const parent = kindOf(ds.kind.parent!.kind);
      const live = await client.get(parent, parentId!);
      if (!live) return { state: null, diagnostics: [error(`No ${parent.kind} with id ${parentId}`, `The ${ds.parent} of this ${what} names nothing on the server.`, ds.node, [ds.parent])] };
      candidates = (live[ds.kind.parent!.nestAs] ?? []) as Doc[];
    } else {
      candidates = await client.list(ds.kind);
    }
    const values = candidates.map((live) => valueOf(ds, live));
    const hits = values.filter((v) => Object.entries(given).every(([k, w]) => matches(v[k], w)));
    if (hits.length === 1) return { state: hits[0], diagnostics: [] };
    const by = Object.keys(given).length ? `with ${Object.entries(given).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(' and ')}` : 'at all (no lookup attribute is set)';
    const narrow = `Set ${ds.lookups.filter((k) => !(k in given)).join(' or ')} to pick one.`;
    return {
      state: null,
      diagnostics: [hits.length === 0
        ? error(`No ${what} matches`, `None of the ${candidates.length} on the server matches ${by.replace(/^with /, '')}.`)
        : error(`${hits.length} ${what} items match`, `A data source reads exactly one; ${hits.length} match ${by.replace(/^with /, '')}. ${narrow}`)],
    };
  } catch (e) {
    return { state: null, diagnostics: [failureDiagnostic(ds.node, `Reading data source ${what}`, e)] };
  }
}
