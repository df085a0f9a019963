// Everything about manifests that can be checked offline: kinds and names, each body
// against the catalog's create schema (defaults filled, values normalised), references
// resolving to declared documents of the right kind, and natural keys not declared twice.
// The result is the desired state the planner compares with the live one.
import path from 'node:path';
import { z } from 'zod';
import type { KindEntry } from '../../provider/catalog/index.js';
import { shapeOf, traitsOf } from '../../provider/catalog/index.js';
import { prefixOfKind } from '../../provider/catalog/fields.js';
import { issueText } from '../../provider/catalog/issue-text.js';
import { nullsAsAbsent } from '../../provider/catalog/nulls.js';
import { mapRefs, schemaAt, splitSecrets, type Path } from '../../provider/catalog/walk.js';
import { addressOf, childSpecsOf, manifestKind, manifestKinds, NAME_PATTERN, onceFields, parseRef, RESERVED_KEYS, type ChildSpec } from './kinds.js';
import type { RawDocument, Source } from './load.js';
import { Problems } from './problems.js';
import { didYouMean } from '../../provider/catalog/validate/suggest.js';

type Doc = Record<string, any>;

export interface DesiredChild {
  spec: ChildSpec;
  /** The natural key's normalised value (a route's match, a rule's canonical CIDR). */
  key: string;
  /** The normalised create body without the parent field; references as `Kind/name` or ids. */
  body: Doc;
  /** Write-only values by path. */
  secrets: Record<string, unknown>;
  source: Source;
}

export interface Desired {
  entry: KindEntry;
  kind: string;
  name: string;
  address: string;
  /** Bound explicitly to this existing resource. */
  id?: string;
  preventDestroy: boolean;
  /** ignore_changes: fields set on create and never planned again, top-level ones and per child key (`routes`). */
  ignore: { fields: string[]; children: Record<string, string[]> };
  /** Where a create writes the values returned only once (an API key's token): an absolute path. */
  tokenFile?: string;
  /** The normalised create body without children; references as `Kind/name` or ids. */
  body: Doc;
  secrets: Record<string, unknown>;
  children: Record<string, DesiredChild[]>;
  /** Addresses of the documents this one (or its children) refers to. */
  dependsOn: Set<string>;
  source: Source;
  /** Where a value of the document is written (a problem found after checking points there). */
  lineAt(path: Path): number;
}

export interface Manifest {
  documents: Desired[];
  byAddress: Map<string, Desired>;
}

const isObject = (v: unknown): v is Doc => v != null && typeof v === 'object' && !Array.isArray(v);

/** A placeholder id standing for a `Kind/name` reference while the create schema checks the body. */
const placeholder = (kind: string, n: number) => `${prefixOfKind.get(kind)}_edgeformref${n}x`;

interface Checked {
  body: Doc;
  secrets: Record<string, unknown>;
}

class Checker {
  private readonly placeholders = new Map<string, string>();
  private n = 0;

  constructor(
    private readonly names: Map<string, Source>,
    private readonly problems: Problems,
  ) {}

  /** Validates one body with a kind's create schema, references swapped for placeholders and back. */
  check(entry: KindEntry, raw: Doc, doc: RawDocument, at: Path, deps: Set<string>, extra: Doc = {}): Checked | undefined {
    let ok = true;
    const report = (path: Path, message: string) => {
      ok = false;
      this.problems.add({ file: doc.source.file, line: doc.lineAt([...at, ...path]) }, `${[...at, ...path].length ? `${fieldText([...at, ...path])}: ` : ''}${message}`);
    };
    const swapped = mapRefs(entry.fields, raw, (value, ref, path) => {
      const r = parseRef(value);
      if (!r) return value;
      // A bad reference still gets a placeholder, so the rest of the body is checked in this run too.
      if (!ref.to.includes(r.kind)) report(path, `${value} cannot be referenced here; this field takes ${ref.to.join(' or ')}`);
      else if (!this.names.has(value)) report(path, `${value} is not declared in these manifests${didYouMean(r.name, [...this.names.keys()].filter((n) => n.startsWith(`${r.kind}/`)).map((n) => n.slice(r.kind.length + 1)))} (declare a ${r.kind} named ${r.name}, or give a raw id)`);
      else deps.add(value);
      const id = placeholder(ref.to.includes(r.kind) ? r.kind : ref.to[0], this.n++);
      this.placeholders.set(id, value);
      return id;
    });
    // As the API reads a body: `description:` left empty in YAML (null) is no value, and takes the default.
    const input = nullsAsAbsent(entry.create, { ...swapped, ...extra }) as Doc;
    const parsed = entry.create.safeParse(input);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        // A placeholder in a path (a weighted backend's key) is reported as the reference written there.
        const path = issuePath(issue);
        const written = path.map((p) => (typeof p === 'string' ? (this.placeholders.get(p) ?? p) : p));
        // An unknown key is reported at the key's own line, not at its object's.
        if (issue.code === 'unrecognized_keys') for (const key of issue.keys) report([...written, key], unknownField(entry, path, at.length === 0, Object.keys(extra), key));
        else report(written, `${issueText(issue)}${quoteHint(issue, valueAt(input, path))}`);
      }
      return undefined;
    }
    if (!ok) return undefined;
    const back = mapRefs(entry.fields, parsed.data, (value) => this.placeholders.get(value) ?? value);
    for (const k of Object.keys(extra)) delete back[k];
    const [, secrets] = splitSecrets(entry.fields, back);
    return { body: back, secrets };
  }
}

/** What to say about an unknown key: the fields that may stand there instead. */
function unknownField(entry: KindEntry, path: Path, topLevel: boolean, omit: string[], key: string): string {
  const shape = shapeOf(schemaAt(z.object(entry.fields), path) ?? z.never()) ?? {};
  const known = Object.keys(shape).filter((k) => !traitsOf(shape[k]).computed && !(path.length === 0 && omit.includes(k)));
  if (topLevel && path.length === 0) known.push(...childSpecsOf(entry.kind).map((c) => c.key));
  return `unknown field${didYouMean(key, known)}${known.length ? `; ${path.length ? 'this object' : entry.kind} takes ${known.join(', ')}` : ''}`;
}

/** The path of a zod issue, extended into a traffic policy when the validator names one. */
function issuePath(issue: z.core.$ZodIssue): Path {
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  const inner = (issue as { params?: { policyPath?: string } }).params?.policyPath;
  return inner ? [...path, inner] : path;
}

const valueAt = (doc: unknown, path: Path): unknown => path.reduce<any>((v, p) => (v != null && typeof v === 'object' ? v[p] : undefined), doc);

/**
 * YAML reads `min_version: 1.2`, `port: 8080` or `enabled: yes`-style values as numbers and
 * booleans; where the field wants text, say to quote it rather than leave the reader
 * puzzling over "expected one of "1.2"" next to the 1.2 they wrote.
 */
function quoteHint(issue: z.core.$ZodIssue, value: unknown): string {
  if (typeof value !== 'number' && typeof value !== 'boolean') return '';
  const wantsText = (issue.code === 'invalid_type' && issue.expected === 'string') || (issue.code === 'invalid_value' && issue.values.every((v) => typeof v === 'string'));
  return wantsText ? `; YAML reads ${value} as a ${typeof value}: quote it to give text` : '';
}

const fieldText = (path: Path) => path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : String(p)), '');

/** Checks raw documents and returns the desired state; problems are added to `problems`. */
export function validateManifests(raw: readonly RawDocument[], problems: Problems): Manifest {
  const names = new Map<string, Source>();
  const accepted: RawDocument[] = [];
  for (const doc of raw) {
    const { kind, name } = doc.value;
    const at = (p: Path) => ({ file: doc.source.file, line: doc.lineAt(p) });
    const entry = typeof kind === 'string' ? manifestKind(kind) : undefined;
    if (!entry) {
      problems.add(at(['kind']), kind == null ? `missing kind; one of ${manifestKinds.map((k) => k.kind).join(', ')}` : `unknown kind ${JSON.stringify(kind)}${didYouMean(String(kind), manifestKinds.map((k) => k.kind))}; one of ${manifestKinds.map((k) => k.kind).join(', ')}`);
      continue;
    }
    if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
      problems.add(at(['name']), name == null ? `${kind} needs a name (unique among ${kind} documents)` : `name ${JSON.stringify(name)} must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit`);
      continue;
    }
    const address = addressOf(kind, name);
    const prior = names.get(address);
    if (prior) {
      problems.add(doc.source, `${address} is declared twice (also at ${prior.file}:${prior.line})`);
      continue;
    }
    names.set(address, doc.source);
    // Its values are incomplete: checking them would only repeat the interpolation problem.
    if (!doc.interpolationFailed) accepted.push(doc);
  }

  const checker = new Checker(names, problems);
  const documents: Desired[] = [];
  for (const doc of accepted) {
    const d = desiredOf(doc, checker, problems);
    if (d) documents.push(d);
  }
  checkUnique(documents, problems);
  checkCycles(documents, problems);
  return { documents, byAddress: new Map(documents.map((d) => [d.address, d])) };
}

function desiredOf(doc: RawDocument, checker: Checker, problems: Problems): Desired | undefined {
  const v = doc.value;
  const entry = manifestKind(v.kind)!;
  const address = addressOf(v.kind, v.name);
  const at = (p: Path) => ({ file: doc.source.file, line: doc.lineAt(p) });
  let ok = true;
  if (v.id !== undefined && (typeof v.id !== 'string' || !v.id.startsWith(`${entry.prefix}_`))) {
    problems.add(at(['id']), `id must be the id of an existing ${entry.kind} (it starts with ${entry.prefix}_)`);
    ok = false;
  }
  if (v.prevent_destroy !== undefined && typeof v.prevent_destroy !== 'boolean') {
    problems.add(at(['prevent_destroy']), 'prevent_destroy must be true or false');
    ok = false;
  }
  const once = onceFields(entry);
  if (v.token_file !== undefined && !once.length) {
    problems.add(at(['token_file']), `token_file applies to kinds whose creation returns a token (${manifestKinds.filter((k) => onceFields(k).length).map((k) => k.kind).join(', ')}), not ${entry.kind}`);
    ok = false;
  } else if (v.token_file !== undefined && (typeof v.token_file !== 'string' || v.token_file.trim() === '')) {
    problems.add(at(['token_file']), 'token_file must be a file path, relative to the manifest file');
    ok = false;
  }
  const specs = childSpecsOf(entry.kind);
  const ignore = ignoreChangesOf(v.ignore_changes, entry, specs, (i, message) => {
    problems.add(at(i === undefined ? ['ignore_changes'] : ['ignore_changes', i]), message);
    ok = false;
  });
  const body: Doc = {};
  for (const [k, val] of Object.entries(v)) {
    if ((RESERVED_KEYS as readonly string[]).includes(k) || specs.some((s) => s.key === k)) continue;
    body[k] = val;
  }
  // A kind whose body has a `name` (a bot user) takes the document's name as its own.
  if ('name' in entry.fields) body.name = v.name;
  const deps = new Set<string>();
  const checked = checker.check(entry, body, doc, [], deps);
  if (!checked) ok = false;

  const children: Record<string, DesiredChild[]> = {};
  for (const spec of specs) {
    const list = v[spec.key] ?? [];
    if (!Array.isArray(list)) {
      problems.add(at([spec.key]), `${spec.key} must be a list of ${spec.entry.kind} bodies`);
      ok = false;
      continue;
    }
    const seen = new Map<string, number>();
    children[spec.key] = [];
    list.forEach((item: unknown, i: number) => {
      const path = [spec.key, i];
      if (!isObject(item)) {
        problems.add(at(path), `each of ${spec.key} must be a mapping of ${spec.entry.kind} fields`);
        ok = false;
        return;
      }
      if (item[spec.parentField] !== undefined) {
        problems.add(at([...path, spec.parentField]), `leave ${spec.parentField} out: ${spec.key} nest inside their ${entry.kind}`);
        ok = false;
        return;
      }
      // The parent field is required by the child's schema: a placeholder satisfies it.
      const parentPlaceholder = spec.entry.spec.parent?.in === 'body' ? { [spec.parentField]: placeholder(entry.kind, -1) } : {};
      const c = checker.check(spec.entry, item, doc, path, deps, parentPlaceholder);
      if (!c) {
        ok = false;
        return;
      }
      const key = String(c.body[spec.naturalKey]);
      const first = seen.get(key);
      if (first !== undefined) {
        problems.add(at([...path, spec.naturalKey]), `${spec.naturalKey} ${key} is declared twice in ${address} (also ${spec.key}[${first}])`);
        ok = false;
        return;
      }
      seen.set(key, i);
      children[spec.key].push({ spec, key, body: c.body, secrets: c.secrets, source: at(path) });
    });
  }
  if (!ok || !checked) return undefined;
  return {
    entry,
    kind: entry.kind,
    name: v.name,
    address,
    id: v.id,
    preventDestroy: v.prevent_destroy === true,
    ignore,
    tokenFile: typeof v.token_file === 'string' ? path.resolve(path.dirname(doc.source.file), v.token_file) : undefined,
    body: checked.body,
    secrets: checked.secrets,
    children,
    dependsOn: deps,
    source: doc.source,
    lineAt: (p) => doc.lineAt(p),
  };
}

/**
 * `ignore_changes: [description, routes[*].circuit_breaker]`, as Terraform's ignore_changes
 * and Argo CD's ignoreDifferences: field paths in the form validate reports them, a field of
 * the document or `<children>[*].<field>` for a field of every child.
 */
function ignoreChangesOf(value: unknown, entry: KindEntry, specs: readonly ChildSpec[], fail: (index: number | undefined, message: string) => void): Desired['ignore'] {
  const out: Desired['ignore'] = { fields: [], children: {} };
  if (value === undefined) return out;
  if (!Array.isArray(value)) {
    fail(undefined, 'ignore_changes must be a list of field paths, such as [description, routes[*].circuit_breaker]');
    return out;
  }
  const own = Object.keys(entry.fields).filter((f) => !traitsOf(entry.fields[f]).computed);
  const forms = [...own, ...specs.flatMap((s) => Object.keys(s.entry.fields).filter((f) => f !== s.parentField && f !== s.naturalKey).map((f) => `${s.key}[*].${f}`))];
  value.forEach((p, i) => {
    if (typeof p !== 'string') return fail(i, 'each ignore_changes entry is a field path (text)');
    const child = /^([a-z_]+)\[\*\]\.([a-z_]+)$/.exec(p);
    const spec = child && specs.find((s) => s.key === child[1]);
    if (spec && child && child[2] !== spec.parentField && child[2] !== spec.naturalKey && child[2] in spec.entry.fields) (out.children[spec.key] ??= []).push(child[2]);
    else if (spec && child && child[2] === spec.naturalKey) fail(i, `${p}: ${spec.naturalKey} names each of the ${spec.key}; it cannot be ignored`);
    else if (own.includes(p)) out.fields.push(p);
    else fail(i, `ignore_changes: ${JSON.stringify(p)} is not a field of ${entry.kind}${didYouMean(p, forms)}; it takes ${forms.slice(0, 12).join(', ')}${forms.length > 12 ? ', ...' : ''}`);
  });
  return out;
}

/** Values of fields unique across resources (edge hostports) must not be declared twice. */
/**
 * A document that refers to itself, directly or through others (a weighted backend listing
 * itself, or one that lists it back): the server refuses the write that closes the loop, so
 * without this validate and plan passed and apply stopped half-way. Each loop is named once,
 * with its path, at the document it starts from.
 */
function checkCycles(documents: readonly Desired[], problems: Problems) {
  const byAddress = new Map(documents.map((d) => [d.address, d]));
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (d: Desired, trail: string[]) => {
    state.set(d.address, 'visiting');
    for (const dep of [...d.dependsOn].sort()) {
      const t = byAddress.get(dep);
      if (!t) continue;
      if (state.get(dep) === 'visiting') {
        const loop = [...trail.slice(trail.indexOf(dep)), d.address, dep];
        const start = byAddress.get(loop[0])!;
        problems.add(start.source, `reference cycle: ${loop.join(' -> ')}; ${loop.length === 2 ? `${dep} refers to itself` : 'these refer to each other in a loop'}, which the API refuses (a backend may not contain itself, directly or through others)`);
      } else if (!state.has(dep)) visit(t, [...trail, d.address]);
    }
    state.set(d.address, 'done');
  };
  for (const d of documents) if (!state.has(d.address)) visit(d, []);
}

function checkUnique(documents: Desired[], problems: Problems) {
  const seen = new Map<string, string>();
  for (const d of documents) {
    for (const [field, schema] of Object.entries(d.entry.fields)) {
      const u = traitsOf(schema).unique;
      if (!u || u.perParent) continue;
      const value = d.body[field];
      for (const v of Array.isArray(value) ? value : value == null ? [] : [value]) {
        const key = `${u.scope}\u0000${v}`;
        const other = seen.get(key);
        const line = d.lineAt(Array.isArray(value) ? [field, value.indexOf(v)] : [field]) || d.source.line;
        if (other) problems.add({ file: d.source.file, line }, `${u.what} ${v} of ${d.address} is also declared by ${other}; each belongs to one resource`);
        else seen.set(key, d.address);
      }
    }
  }
}

