// What a manifest document may be: the catalog's top-level creatable kinds, with their
// children nested under the parent's `nestAs` key. Everything here is read off the
// catalog, so a new kind or field needs no edit in the reconciler.
import { catalog, childrenOf, traitsOf, type KindEntry } from '../../provider/catalog/index.js';

/** Keys of a document that are not part of the create body. */
export const RESERVED_KEYS = ['kind', 'name', 'id', 'prevent_destroy', 'token_file', 'ignore_changes'] as const;

/** Server-set values returned once, in the creation response (an API key's token): what `token_file` receives. */
export const onceFields = (entry: KindEntry): string[] =>
  Object.entries(entry.spec.computed ?? {}).filter(([, s]) => traitsOf(s as never).once).map(([k]) => k);

/** Document names: what `Kind/name` references use. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Kinds a manifest may declare as documents (top level, creatable, no parent). */
export const manifestKinds: readonly KindEntry[] = catalog.filter((k) => !k.parent && k.operations.includes('create'));

const byKind = new Map(manifestKinds.map((k) => [k.kind, k]));
export const manifestKind = (kind: string) => byKind.get(kind);

export interface ChildSpec {
  /** The child kind (an IP policy rule, an HTTPS edge route). */
  entry: KindEntry;
  /** The key the children nest under in the parent document (`rules`, `routes`). */
  key: string;
  /** The child's field naming its parent, left out in manifests (the nesting says it). */
  parentField: string;
  /** The child's natural key within its parent (`cidr`, `match`). */
  naturalKey: string;
}

const childSpecs = new Map<string, ChildSpec[]>(
  manifestKinds.map((k) => [
    k.kind,
    childrenOf(k.kind).map((c) => {
      const naturalKey = Object.keys(c.fields).find((f) => c.traits(f).naturalKey);
      if (!naturalKey) throw new Error(`${c.kind} nests in ${k.kind} but has no natural key`);
      return { entry: c, key: c.parent!.nestAs, parentField: c.parent!.field, naturalKey };
    }),
  ]),
);

/** The nested children a manifest kind may carry. */
export const childSpecsOf = (kind: string): ChildSpec[] => childSpecs.get(kind) ?? [];

/** Fields of a child's create body that a manifest may set (all but the parent field). */
export const childBodyFields = (c: ChildSpec) => Object.keys(c.entry.fields).filter((f) => f !== c.parentField);

/** A `Kind/name` reference, as opposed to a raw id. */
export const REF_PATTERN = /^([A-Z][A-Za-z]+)\/(.+)$/;

export function parseRef(value: string): { kind: string; name: string } | undefined {
  const m = REF_PATTERN.exec(value);
  return m ? { kind: m[1], name: m[2] } : undefined;
}

export const addressOf = (kind: string, name: string) => `${kind}/${name}`;
