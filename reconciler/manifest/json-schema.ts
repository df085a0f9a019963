// The JSON Schema (draft 2020-12) of one manifest document, generated from the catalog and
// shipped as docs/manifest.schema.json so an editor's YAML language server completes and
// checks manifests. It is each kind's create schema, converted the way the OpenAPI
// document converts it, with what a manifest adds: `kind`, `name`, `id`, `prevent_destroy`,
// nested children, `Kind/name` references, `${env:}`/`${file:}` interpolation and secrets
// marked write-only. The offline `validate` command remains the full check (cross-field
// rules, CIDRs, references that resolve); this schema is what an editor can check alone.
import type { z } from 'zod';
import { toJsonSchema, type JsonSchema, type JsonSchemaOverride } from '../../provider/catalog/json-schema.js';
import { findKind, type KindEntry } from '../../provider/catalog/index.js';
import { defOf, traitsOf, type RefTrait } from '../../provider/catalog/traits.js';
import { childSpecsOf, manifestKind, manifestKinds, NAME_PATTERN, onceFields, RESERVED_KEYS, type ChildSpec } from './kinds.js';

/** A string holding `${env:NAME}` or `${file:path}` anywhere: its value is only known at load time. */
export const INTERPOLATION_PATTERN = '\\$\\{(?:env|file):[^}]+\\}';

const interpolation = (): JsonSchema => ({ pattern: INTERPOLATION_PATTERN });

/** Keywords a literal must satisfy but an interpolated string cannot be checked against. */
const LITERAL_KEYWORDS = ['enum', 'const', 'pattern', 'format'] as const;

/**
 * Lets a constrained string also be an interpolation: its enum, pattern or format move into
 * the first branch of an `anyOf` (so editors still complete the enum), the second accepts
 * `${...}`. Idempotent, as zod calls the override for a schema and for its clones.
 */
function allowInterpolation(json: JsonSchema): void {
  if (json.type !== 'string' || !LITERAL_KEYWORDS.some((k) => k in json)) return;
  const literal: JsonSchema = {};
  for (const k of LITERAL_KEYWORDS) {
    if (k in json) {
      literal[k] = json[k];
      delete json[k];
    }
  }
  json.anyOf = [literal, interpolation()];
}

/** The pattern of a `Kind/name` reference to any of `kinds`. */
const refPattern = (kinds: readonly string[]) => `^(?:${kinds.join('|')})/${NAME_PATTERN.source.replace(/^\^/, '')}`;

/** What one reference value accepts: a `Kind/name` of a kind a manifest can declare, a raw id, or an interpolation. */
export function refValueSchema(ref: RefTrait): JsonSchema {
  const declarable = ref.to.filter((k) => manifestKind(k));
  const prefixes = ref.to.map((k) => findKind(k)?.prefix).filter(Boolean);
  const id = `the raw id of an existing ${ref.to.join(' or ')} (${prefixes.map((p) => `${p}_…`).join(' or ')})`;
  return {
    type: 'string',
    description: declarable.length ? `A reference ${declarable.map((k) => `${k}/<name>`).join(' or ')} to a document in the manifests, or ${id}.` : `${id[0].toUpperCase()}${id.slice(1)}.`,
    anyOf: [
      ...(declarable.length ? [{ pattern: refPattern(declarable) }] : []),
      { pattern: `^(?:${prefixes.join('|')})_.+$` },
      interpolation(),
    ],
  };
}

/** Appends a sentence to a node's description once, however often zod calls the override for it. */
function addNote(json: JsonSchema, note: string): void {
  const text = String(json.description ?? '');
  if (!text.includes(note)) json.description = text ? `${text} ${note}` : note;
}

/**
 * Puts the reference form where the ids are: the string itself, a list's items or a map's
 * keys. Wrappers (optional, default, a described copy) get it too, so the field's own
 * description gains the note whichever node carries it.
 */
function allowReferences(json: JsonSchema, ref: RefTrait): void {
  const value = refValueSchema(ref);
  if (ref.inKeys && json.type === 'object') json.propertyNames = value;
  else if (!ref.inKeys && json.type === 'array') json.items = value;
  else if (!ref.inKeys && json.type === 'string') {
    for (const k of ['pattern', 'format', 'minLength', 'maxLength']) delete json[k];
    json.anyOf = value.anyOf;
  } else return;
  addNote(json, value.description);
}

const SECRET_NOTE = 'Secret: write-only, never returned by the API and never shown in plans; keep it out of the file with ${env:NAME} or ${file:path}.';

/** Drops server-set fields (a SAML module's URLs): input that names them is refused. */
function dropComputed(zodSchema: z.ZodType, json: JsonSchema): void {
  if (defOf(zodSchema).type !== 'object' || !json.properties) return;
  const shape = (zodSchema as z.ZodObject).shape;
  for (const [k, s] of Object.entries(shape)) {
    if (!traitsOf(s as z.ZodType).computed) continue;
    delete json.properties[k];
    if (Array.isArray(json.required)) json.required = json.required.filter((r: string) => r !== k);
  }
}

/** Adjusts every converted node by its traits; the table the manifest adds to the catalog's JSON Schema. */
const manifestOverride: JsonSchemaOverride = ({ zodSchema, jsonSchema }) => {
  const t = traitsOf(zodSchema);
  if (t.ref) allowReferences(jsonSchema, t.ref);
  else allowInterpolation(jsonSchema);
  if (t.writeOnly) {
    jsonSchema.writeOnly = true;
    addNote(jsonSchema, SECRET_NOTE);
  }
  dropComputed(zodSchema, jsonSchema);
};

const bodySchema = (entry: KindEntry) => toJsonSchema(entry.create, 'input', manifestOverride);

function withoutProperty(json: JsonSchema, key: string): JsonSchema {
  const { [key]: _dropped, ...properties } = json.properties ?? {};
  const { required: _all, ...rest } = json;
  const required = (json.required ?? []).filter((r: string) => r !== key);
  return { ...rest, properties, ...(required.length ? { required } : {}) };
}

function childrenSchema(parent: KindEntry, c: ChildSpec): JsonSchema {
  const item = withoutProperty(bodySchema(c.entry), c.parentField);
  return {
    type: 'array',
    description: `${c.entry.summary} Each is identified by its ${c.naturalKey} within the ${parent.kind}; the parent field ${c.parentField} is left out.`,
    items: { title: c.entry.kind, ...item },
  };
}

const NAME_TEXT = 'Name of the document, unique among documents of its kind: 1-128 letters, digits, ".", "_" or "-", starting with a letter or digit. Other documents refer to it as Kind/name.';

/** The schema of one kind's documents. */
export function documentSchema(entry: KindEntry): JsonSchema {
  const body = bodySchema(entry);
  const children = childSpecsOf(entry.kind);
  const bodyProps: JsonSchema = body.properties ?? {};
  for (const c of children) {
    if (c.key in bodyProps) throw new Error(`${entry.kind}: field ${c.key} clashes with its nested ${c.entry.kind} children`);
  }
  for (const k of RESERVED_KEYS) {
    // A body field named like a document key (a bot user's `name`) is that key: the document's name is the bot's name.
    if (k in bodyProps && k !== 'name') throw new Error(`${entry.kind}: field ${k} clashes with the manifest document key of that name`);
  }
  const { name: bodyName, ...fields } = bodyProps;
  const name: JsonSchema = { type: 'string', description: NAME_TEXT, pattern: NAME_PATTERN.source };
  if (bodyName) name.description = `${NAME_TEXT} It is also the ${entry.kind}'s name field: ${bodyName.description ?? ''}`.trim();
  allowInterpolation(name);
  const id: JsonSchema = {
    type: 'string',
    description: `Binds this document to the existing ${entry.kind} with this id (${entry.prefix}_…) instead of finding it by its stamp or natural key; edgeform export writes it.`,
    pattern: `^${entry.prefix}_.+$`,
  };
  allowInterpolation(id);
  const required = ['kind', 'name', ...(body.required ?? []).filter((r: string) => r !== 'name')];
  return {
    title: entry.kind,
    description: entry.summary,
    type: 'object',
    required,
    properties: {
      kind: { const: entry.kind, description: entry.summary },
      name,
      id,
      prevent_destroy: { type: 'boolean', default: false, description: 'When true, plans refuse to delete or replace this resource (prune, destroy, or a change to a field that forces replacement).' },
      ignore_changes: { type: 'array', items: { type: 'string', minLength: 1 }, description: 'Field paths set on create and never planned again: a field of the document, or <children>[*].<field> (routes[*].circuit_breaker).' },
      ...(onceFields(entry).length
        ? { token_file: { type: 'string', minLength: 1, description: 'File (relative to the manifest) that apply writes the token to, mode 0600, when it creates this resource: the server returns the token only once.' } }
        : {}),
      ...fields,
      ...Object.fromEntries(children.map((c) => [c.key, childrenSchema(entry, c)])),
    },
    additionalProperties: false,
  };
}

/** The JSON Schema of a manifest document: `kind` picks one of the per-kind schemas in `$defs`. */
export function manifestJsonSchema(): JsonSchema {
  const kinds = manifestKinds.map((k) => k.kind);
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'edgeform manifest document',
    description: 'One document of an edgeform manifest (multi-document YAML): kind, name and the create body of that kind, children nested. See docs/manifest.md.',
    type: 'object',
    required: ['kind', 'name'],
    properties: {
      kind: { type: 'string', enum: kinds, description: 'The resource kind this document declares.' },
    },
    allOf: kinds.map((k) => ({ if: { properties: { kind: { const: k } }, required: ['kind'] }, then: { $ref: `#/$defs/${k}` } })),
    $defs: Object.fromEntries(manifestKinds.map((k) => [k.kind, documentSchema(k)])),
  };
}
