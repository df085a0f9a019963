// Turns a synthesized CDKTF stack (cdk.tf.json) into reconciler manifest documents, so
// `edgeform plan|apply --cdktf DIR` deploys a stack without Terraform. The provider schema
// says what each resource's attributes are (its attribute names are the create body's), the
// reconciler's manifest kinds say which kinds are documents and which nest in a parent, and
// the catalog's ref traits say where a `${edgeform_x.name.id}` may stand (it becomes
// `Kind/name`). Nothing here names a kind or a field.
//
// What Terraform would evaluate and a manifest cannot express is a problem, never a guess:
// other providers' resources, data sources, modules, count/for_each, references to anything
// but an edgeform resource's id, and templates around a reference. Two Terraform idioms
// have manifest equivalents and are translated: `${var.NAME}` reads TF_VAR_NAME from the
// environment (as Terraform does; a variable's default is not applied), and
// `${file("PATH")}` reads PATH relative to the synth folder (made absolute here).
import path from 'node:path';
import { kindOf } from '../catalog/index.js';
import { traitsOf, type RefTrait } from '../catalog/traits.js';
import { childSpecsOf, manifestKind, NAME_PATTERN, RESERVED_KEYS } from '../../reconciler/manifest/kinds.js';
import { resourceType, resourceTypeName, type ObjectNode, type ResourceType } from '../terraform/schema.js';

type Doc = Record<string, unknown>;

export interface SynthManifests {
  documents: Doc[];
  problems: string[];
}

/** Meta-arguments a resource may carry that change nothing in its body. */
const IGNORED_META = new Set(['//', 'depends_on']);
/** Meta-arguments with no manifest equivalent. */
const UNSUPPORTED_META: Record<string, string> = {
  count: 'count has no manifest equivalent; declare each resource in the stack',
  for_each: 'for_each has no manifest equivalent; declare each resource in the stack',
  provider: 'provider aliases have no manifest equivalent: --cdktf deploys to the one server given by --api-url',
  provisioner: 'provisioners are Terraform-only',
  connection: 'provisioners are Terraform-only',
};
/** Lifecycle settings the reconciler honours or needs not (it orders creates and deletes itself). */
const LIFECYCLE = new Set(['prevent_destroy', 'create_before_destroy']);
/** Top-level sections that carry no resources for us. */
const IGNORED_SECTIONS = new Set(['//', 'terraform', 'provider', 'output', 'variable', 'locals']);

const isObject = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);

const IDENT = '[A-Za-z_][A-Za-z0-9_-]*';
const RESOURCE_REF = new RegExp(`^(${IDENT})\\.(${IDENT})\\.(${IDENT})$`);
const VAR_REF = new RegExp(`^var\\.(${IDENT})$`);
const FILE_CALL = /^file\(\s*"([^"\\]*)"\s*\)$/;

interface Context {
  baseDir: string;
  /** Declared edgeform resources by address (`type.name`). */
  declared: Map<string, ResourceType>;
  /** Document names by address. */
  names: Map<string, string>;
  variables: Set<string>;
  problem(where: string, text: string): void;
}

/** A `${...}` expression that is not a resource reference: a variable or a file. */
function interpolation(expr: string, ctx: Context, where: string): string | undefined {
  const v = VAR_REF.exec(expr);
  if (v) {
    if (!ctx.variables.has(v[1])) ctx.problem(where, `refers to var.${v[1]}, which the stack does not declare`);
    return `\${env:TF_VAR_${v[1]}}`;
  }
  const f = FILE_CALL.exec(expr);
  if (f) return `\${file:${path.resolve(ctx.baseDir, f[1])}}`;
  ctx.problem(where, `\${${expr}} cannot be evaluated without Terraform; --cdktf understands \${edgeform_<type>.<name>.id} where an id goes, \${var.NAME} and \${file("PATH")}`);
  return undefined;
}

/** `Kind/name` for a whole-string reference to a declared resource's id, else undefined (with a problem). */
function reference(expr: string, ref: RefTrait | undefined, ctx: Context, where: string): string | undefined {
  const [, type, name, attr] = RESOURCE_REF.exec(expr)!;
  const target = ctx.declared.get(`${type}.${name}`);
  if (!target) {
    ctx.problem(where, `refers to ${type}.${name}, which the stack does not declare (or --cdktf cannot deploy)`);
    return undefined;
  }
  if (attr !== 'id') return void ctx.problem(where, `refers to ${type}.${name}.${attr}; a manifest can refer to a resource only by its id`);
  if (!ref) return void ctx.problem(where, `refers to ${type}.${name}.id where the API takes no reference, so its value is known only after apply`);
  if (!manifestKind(target.kind.kind)) return void ctx.problem(where, `refers to ${type}.${name}, a ${target.kind.kind}, which manifests nest in its parent and cannot name`);
  return `${target.kind.kind}/${ctx.names.get(`${type}.${name}`)}`;
}

/**
 * A string from the synthesized JSON: a whole `${...}` is a reference or an interpolation;
 * a template with `${...}` inside may hold interpolations only. `$${` and `%%{` are
 * Terraform's escapes for a literal `${` and `%{`.
 */
function convertString(s: string, ref: RefTrait | undefined, ctx: Context, where: string): string | undefined {
  const whole = /^\$\{([^{}]*)\}$/.exec(s);
  if (whole && RESOURCE_REF.test(whole[1].trim())) return reference(whole[1].trim(), ref, ctx, where);
  let ok = true;
  const out = s.replace(/(\$\$|%%|\$|%)\{([^{}]*)\}/g, (all, sigil: string, expr: string) => {
    if (sigil === '%%') return all.slice(1);
    if (sigil === '$$') {
      // The reconciler would interpolate a literal `${`; no manifest spelling keeps it.
      ok = false;
      ctx.problem(where, 'a literal ${ (written $${) cannot be carried into a manifest');
      return all;
    }
    if (sigil === '%') {
      ok = false;
      ctx.problem(where, `template directives (%{...}) cannot be evaluated without Terraform`);
      return all;
    }
    const e = expr.trim();
    if (RESOURCE_REF.test(e)) {
      ok = false;
      ctx.problem(where, `\${${e}} inside a longer string cannot be resolved before apply; use the reference as the whole value`);
      return all;
    }
    const value = interpolation(e, ctx, where);
    if (value === undefined) ok = false;
    return value ?? all;
  });
  return ok ? out : undefined;
}

function convertValue(v: unknown, ref: RefTrait | undefined, ctx: Context, where: string): unknown {
  if (typeof v === 'string') return convertString(v, ref, ctx, where);
  if (Array.isArray(v)) return v.map((e, i) => convertValue(e, ref, ctx, `${where}[${i}]`));
  if (isObject(v)) {
    // A map attribute: a ref trait on it concerns its keys (a weighted backend's backends) or its values.
    const out: Doc = {};
    for (const [k, e] of Object.entries(v)) {
      const key = convertString(k, ref?.inKeys ? ref : undefined, ctx, `${where}[${JSON.stringify(k)}]`);
      if (key !== undefined) out[key] = convertValue(e, ref?.inKeys ? undefined : ref, ctx, `${where}[${JSON.stringify(k)}]`);
    }
    return out;
  }
  return v;
}

/** The create-body form of one resource's (or block's) configuration. */
function convertObject(node: ObjectNode, value: unknown, ctx: Context, where: string, skip: ReadonlySet<string> = new Set()): Doc {
  const out: Doc = {};
  if (!isObject(value)) {
    ctx.problem(where, 'expected a block (a JSON object)');
    return out;
  }
  const attrs = new Map(node.attributes.map((a) => [a.name, a]));
  const blocks = new Map(node.blocks.map((b) => [b.name, b]));
  for (const [key, v] of Object.entries(value)) {
    const at = `${where}.${key}`;
    if (skip.has(key) || v === null || v === undefined) continue;
    const a = attrs.get(key);
    const b = blocks.get(key);
    if (a) {
      if (a.role === 'computed') ctx.problem(at, 'is set by the server and cannot be configured');
      else out[key] = convertValue(v, a.field ? traitsOf(a.field).ref : undefined, ctx, at);
    } else if (b) {
      // Terraform's JSON syntax takes a block as an object or as a list of them.
      const items = Array.isArray(v) ? v : [v];
      if (b.nesting === 'single') {
        if (items.length > 1) ctx.problem(at, 'takes one block');
        out[key] = convertObject(b.block, items[0], ctx, at);
      } else out[key] = items.map((e, i) => convertObject(b.block, e, ctx, `${at}[${i}]`));
    } else ctx.problem(at, 'is not an argument of this resource type');
  }
  return out;
}

/** The address (`type.name`) a parent field refers to, when it is a whole reference to the right type. */
function parentAddress(value: unknown, parentType: string): string | undefined {
  const m = typeof value === 'string' ? /^\$\{([^{}]*)\}$/.exec(value) : null;
  const r = m && RESOURCE_REF.exec(m[1].trim());
  return r && r[1] === parentType && r[3] === 'id' ? `${r[1]}.${r[2]}` : undefined;
}

interface Entry { rt: ResourceType; name: string; config: unknown }

/**
 * Document names by address: the resource's name, except for a kind whose create body has
 * a field a document uses itself (a bot user's `name`): that field names the document, so
 * the two cannot disagree, and references follow it.
 */
function documentNames(entries: Entry[], problem: (where: string, text: string) => void): Map<string, string> {
  const names = new Map<string, string>();
  const taken = new Set<string>();
  for (const { rt, name, config } of entries) {
    const where = `resource.${rt.typeName}.${name}`;
    let docName = name;
    for (const key of RESERVED_KEYS) {
      if (!(key in rt.kind.fields) || !isObject(config) || config[key] == null) continue;
      const value = config[key];
      if (key !== 'name') problem(`${where}.${key}`, `${key} is a manifest document's own key, so a ${rt.kind.kind} cannot carry it`);
      else if (typeof value !== 'string' || value.includes('${')) problem(`${where}.${key}`, 'must be a literal string: it names the manifest document');
      else docName = value;
    }
    if (rt.kind.parent) continue;
    if (!NAME_PATTERN.test(docName)) problem(where, `"${docName}" cannot name a manifest document: names match ${NAME_PATTERN}`);
    if (taken.has(`${rt.kind.kind}/${docName}`)) problem(where, `a second ${rt.kind.kind} named "${docName}"`);
    taken.add(`${rt.kind.kind}/${docName}`);
    names.set(`${rt.typeName}.${name}`, docName);
  }
  return names;
}

export function manifestsFromSynth(json: unknown, baseDir: string): SynthManifests {
  const file = path.join(baseDir, 'cdk.tf.json');
  const problems: string[] = [];
  const problem = (where: string, text: string) => problems.push(`${file}: ${where ? `${where}: ` : ''}${text}`);
  if (!isObject(json)) {
    problem('', 'expected a JSON object, as `cdktf synth` writes in cdk.tf.json');
    return { documents: [], problems };
  }
  for (const [section, value] of Object.entries(json)) {
    if (section === 'resource' || IGNORED_SECTIONS.has(section)) continue;
    if (isObject(value) && Object.keys(value).length === 0) continue;
    problem(section, `${section} blocks cannot be evaluated without Terraform; --cdktf deploys edgeform resources only`);
  }
  const resources = json.resource ?? {};
  if (!isObject(resources)) {
    problem('resource', 'expected an object of resource types');
    return { documents: [], problems };
  }

  const declared = new Map<string, ResourceType>();
  const entries: Entry[] = [];
  for (const [type, byName] of Object.entries(resources)) {
    const rt = resourceType(type);
    if (!rt) {
      problem(`resource.${type}`, type.startsWith('edgeform_') ? 'is not an edgeform resource type' : 'belongs to another provider; --cdktf deploys edgeform resources only, so deploy this stack with terraform');
      continue;
    }
    if (!isObject(byName)) {
      problem(`resource.${type}`, 'expected an object of resources by name');
      continue;
    }
    for (const [name, config] of Object.entries(byName)) {
      declared.set(`${type}.${name}`, rt);
      entries.push({ rt, name, config });
    }
  }
  const names = documentNames(entries, problem);
  const ctx: Context = { baseDir, declared, names, variables: new Set(isObject(json.variable) ? Object.keys(json.variable) : []), problem };

  const documents = new Map<string, Doc>();
  const children: { parent: string; key: string; body: Doc }[] = [];
  for (const { rt, name, config } of entries) {
    const where = `resource.${rt.typeName}.${name}`;
    let preventDestroy = false;
    if (isObject(config)) {
      for (const key of Object.keys(config)) if (UNSUPPORTED_META[key]) problem(`${where}.${key}`, UNSUPPORTED_META[key]);
      const lifecycle = config.lifecycle;
      if (isObject(lifecycle)) {
        for (const key of Object.keys(lifecycle)) if (!LIFECYCLE.has(key)) problem(`${where}.lifecycle.${key}`, 'has no manifest equivalent');
        preventDestroy = lifecycle.prevent_destroy === true;
      }
    }
    const skip = new Set([...IGNORED_META, 'lifecycle', ...Object.keys(UNSUPPORTED_META)]);
    const parent = rt.kind.parent;
    if (parent) {
      // A child (a rule, a route) folds into its parent's document.
      const spec = manifestKind(parent.kind) && childSpecsOf(parent.kind).find((c) => c.entry.kind === rt.kind.kind);
      const parentType = resourceTypeName(kindOf(parent.kind));
      const raw = isObject(config) ? config[parent.field] : undefined;
      const at = parentAddress(raw, parentType);
      if (!spec) problem(where, `a ${rt.kind.kind} has no place in a manifest`);
      else if (!at || !declared.has(at)) problem(`${where}.${parent.field}`, `must be \${${parentType}.<name>.id} for a ${parent.kind} of this stack: manifests nest each ${rt.kind.kind} in its ${parent.kind}`);
      if (preventDestroy) problem(`${where}.lifecycle.prevent_destroy`, `applies to whole documents; set it on the ${parent.kind}`);
      const body = convertObject(rt.node, config, ctx, where, new Set([...skip, parent.field]));
      if (spec && at) children.push({ parent: at, key: spec.key, body });
      continue;
    }
    if (!manifestKind(rt.kind.kind)) {
      problem(where, `a ${rt.kind.kind} has no place in a manifest`);
      continue;
    }
    const body = convertObject(rt.node, config, ctx, where, skip);
    const { name: _, ...fields } = body;
    documents.set(`${rt.typeName}.${name}`, { kind: rt.kind.kind, name: names.get(`${rt.typeName}.${name}`), ...fields, ...(preventDestroy ? { prevent_destroy: true } : {}) });
  }
  for (const c of children) {
    const doc = documents.get(c.parent);
    if (!doc) continue; // its parent already has a problem
    ((doc[c.key] ??= []) as Doc[]).push(c.body);
  }
  return { documents: [...documents.values()], problems };
}
