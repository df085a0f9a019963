// Every field a kind's body may hold, nested ones included, with its traits: what the
// generated kinds table in docs/manifest.md lists as references and secrets.
import type { z } from 'zod';
import type { KindEntry } from '../../provider/catalog/index.js';
import { defOf, shapeOf, traitsOf, unwrap, type Traits } from '../../provider/catalog/traits.js';
import { childBodyFields, childSpecsOf } from './kinds.js';

export interface FieldPath {
  /** Dotted path; `[]` steps into a list's items, `.*` into a map's values. */
  path: string;
  traits: Traits;
}

/** The shape one level down from a field (object, list of objects, map of objects) and the path step to it. */
function nested(schema: z.ZodType): [Record<string, z.ZodType>, string] | undefined {
  const own = shapeOf(schema);
  if (own) return [own, ''];
  const d = defOf(unwrap(schema)) as unknown as { type: string; element?: z.ZodType; valueType?: z.ZodType };
  const items = d.type === 'array' ? d.element : d.type === 'record' ? d.valueType : undefined;
  const shape = items && shapeOf(items);
  return shape ? [shape, d.type === 'array' ? '[]' : '.*'] : undefined;
}

export function fieldPaths(shape: Record<string, z.ZodType>, base = ''): FieldPath[] {
  return Object.entries(shape).flatMap(([name, schema]) => {
    const path = base ? `${base}.${name}` : name;
    const inner = nested(schema);
    return [{ path, traits: traitsOf(schema) }, ...(inner ? fieldPaths(inner[0], `${path}${inner[1]}`) : [])];
  });
}

/** Every field of a kind's manifest document: its body's, then each nested child's (without the parent field), under the child key. */
export function documentFieldPaths(entry: KindEntry): FieldPath[] {
  return [
    ...fieldPaths(entry.fields),
    ...childSpecsOf(entry.kind).flatMap((c) => fieldPaths(Object.fromEntries(childBodyFields(c).map((f) => [f, c.entry.fields[f]])), `${c.key}[]`)),
  ];
}
