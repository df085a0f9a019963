// The human renderer: Terraform's symbols, headers and summary lines, one line per changed
// field. It reads only the plan's changes; colour only when the output is a terminal.
import type { Change, Plan } from '../plan/types.js';
import { isNoop, summarize } from '../plan/types.js';
import { SENSITIVE } from '../plan/plan.js';
import { parseRef, manifestKind } from '../manifest/kinds.js';
import type { ExecuteResult, Failure } from '../apply/execute.js';

export interface Style {
  green(s: string): string;
  red(s: string): string;
  yellow(s: string): string;
  cyan(s: string): string;
  bold(s: string): string;
  dim(s: string): string;
}

const wrap = (open: number, close: number) => (s: string) => `\u001b[${open}m${s}\u001b[${close}m`;
export const colours: Style = { green: wrap(32, 39), red: wrap(31, 39), yellow: wrap(33, 39), cyan: wrap(36, 39), bold: wrap(1, 22), dim: wrap(2, 22) };
const id = (s: string) => s;
export const plain: Style = { green: id, red: id, yellow: id, cyan: id, bold: id, dim: id };

/** Colour when the stream is a terminal and NO_COLOR is unset (and FORCE_COLOR forces it). */
export function styleFor(stream: NodeJS.WriteStream, disabled = false): Style {
  // TERM=dumb: a terminal that shows escape codes as text (Emacs shell, some CI logs).
  if (disabled || process.env.NO_COLOR || process.env.TERM === 'dumb') return plain;
  if (process.env.FORCE_COLOR && process.env.FORCE_COLOR !== '0') return colours;
  return stream.isTTY ? colours : plain;
}

function value(v: unknown): string {
  if (v === SENSITIVE) return '(sensitive value)';
  if (typeof v === 'string') {
    const ref = parseRef(v);
    if (ref && manifestKind(ref.kind)) return `(known after apply: ${v})`;
    if (v.includes('\n')) {
      const lines = v.replace(/\n$/, '').split('\n');
      return lines.length > 3 ? `${JSON.stringify(lines[0])} ... (${lines.length} lines)` : JSON.stringify(v);
    }
    return JSON.stringify(v.length > 200 ? `${v.slice(0, 200)}...` : v);
  }
  const text = JSON.stringify(v);
  return text === undefined ? 'null' : text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

const fieldOf = (pointer: string) =>
  pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');

function get(doc: unknown, pointer: string): unknown {
  let cur: any = doc;
  for (const p of pointer.split('/').slice(1)) {
    if (cur == null) return undefined;
    cur = cur[p.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return cur;
}

type Verb = 'create' | 'update' | 'delete' | 'replace' | 'no-op';

export function verbOf(c: Change): Verb {
  if (c.actions.length === 2) return 'replace';
  return c.actions[0] as Verb;
}

function symbol(verb: Verb, s: Style) {
  switch (verb) {
    case 'create': return s.green('+');
    case 'delete': return s.red('-');
    case 'update': return s.yellow('~');
    case 'replace': return `${s.red('-')}/${s.green('+')}`;
    default: return ' ';
  }
}

const headline: Record<Verb, string> = {
  create: 'will be created',
  update: 'will be updated in-place',
  delete: 'will be destroyed',
  replace: 'must be replaced',
  'no-op': 'has no changes',
};

const isObject = (v: unknown): v is Record<string, unknown> => v != null && typeof v === 'object' && !Array.isArray(v);
const isScalar = (v: unknown) => v === null || typeof v !== 'object';

/**
 * A value as Terraform shows it: scalars on the line, objects and lists of objects as
 * indented blocks, each nested line with the change's symbol. `label` is `key = ` (padded)
 * or empty for a list item.
 */
function valueLines(sym: string, label: string, v: unknown, indent: string, trail = ''): string[] {
  if (Array.isArray(v) && v.every(isScalar)) {
    const inline = `[${v.map(value).join(', ')}]`;
    if (inline.length <= 100) return [`${indent}${sym} ${label}${inline}${trail}`];
    return [`${indent}${sym} ${label}[`, ...v.map((x) => `${indent}    ${value(x)},`), `${indent}  ]${trail}`];
  }
  if (Array.isArray(v)) {
    if (!v.length) return [`${indent}${sym} ${label}[]${trail}`];
    return [`${indent}${sym} ${label}[`, ...v.flatMap((x) => valueLines(sym, '', x, `${indent}    `, ',')), `${indent}  ]${trail}`];
  }
  if (isObject(v)) {
    const keys = Object.keys(v);
    if (!keys.length) return [`${indent}${sym} ${label}{}${trail}`];
    const width = Math.max(...keys.map((k) => k.length));
    return [`${indent}${sym} ${label}{`, ...keys.flatMap((k) => valueLines(sym, `${k.padEnd(width)} = `, v[k], `${indent}    `)), `${indent}  }${trail}`];
  }
  return [`${indent}${sym} ${label}${value(v)}${trail}`];
}

const isMultiline = (v: string) => v !== SENSITIVE && v.replace(/\n$/, '').includes('\n');

/** Lines of a and b in order, each kept (' '), removed ('-') or added ('+'): a longest common subsequence. */
function lineDiff(a: string[], b: string[]): Array<[' ' | '-' | '+', string]> {
  const lcs = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out: Array<[' ' | '-' | '+', string]> = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) out.push([' ', a[i++]]), j++;
    else if (i < a.length && (j === b.length || lcs[i + 1][j] >= lcs[i][j + 1])) out.push(['-', a[i++]]);
    else out.push(['+', b[j++]]);
  }
  return out;
}

/**
 * A multi-line string changed in place, as Terraform shows it: a heredoc with the lines
 * removed and added, and unchanged runs beyond two lines of context hidden. (The first
 * line and a line count told nothing: a traffic policy's capacity changed unseen.)
 */
function textDiffLines(s: Style, label: string, was: string, now: string, trail: string): string[] {
  const a = was.replace(/\n$/, '').split('\n');
  const b = now.replace(/\n$/, '').split('\n');
  // Quadratic: past a size no one reads line by line, the summary will do.
  if (a.length * b.length > 250_000) return [`      ${s.yellow('~')} ${label}${value(was)} -> ${value(now)}${trail}`];
  const diff = lineDiff(a, b);
  const near = (k: number) => diff.slice(Math.max(0, k - 2), k + 3).some(([m]) => m !== ' ');
  const out = [`      ${s.yellow('~')} ${label}<<-EOT${trail}`];
  let hidden = 0;
  diff.forEach(([m, line], k) => {
    if (m === ' ' && !near(k)) return void hidden++;
    if (hidden) out.push(`            ${s.dim(`# (${hidden} unchanged line${hidden === 1 ? '' : 's'} hidden)`)}`), (hidden = 0);
    out.push(m === ' ' ? `            ${line}` : `          ${m === '-' ? s.red('-') : s.green('+')} ${line}`);
  });
  if (hidden) out.push(`            ${s.dim(`# (${hidden} unchanged line${hidden === 1 ? '' : 's'} hidden)`)}`);
  out.push('        EOT');
  return out;
}

/** Every field of a document under one symbol, keys aligned. */
function documentLines(sym: string, doc: Record<string, unknown>): string[] {
  const width = Math.max(0, ...Object.keys(doc).map((k) => k.length));
  return Object.entries(doc).flatMap(([k, v]) => valueLines(sym, `${k.padEnd(width)} = `, v, '      '));
}

/** The lines for one change: a header and one line per field. */
export function renderChange(c: Change, s: Style): string[] {
  const verb = verbOf(c);
  const out: string[] = [];
  const notes = [
    c.deletedOutside ? 'not found: deleted outside edgeform, or never applied' : c.drift ? 'changed outside edgeform since the last apply' : '',
    c.adopt ? 'adopted into this stack' : '',
    c.removedFrom ? `no longer listed in ${c.removedFrom}, whose document it is part of; deleted without --prune` : '',
    c.deletedWith ? `the server deletes it with ${c.deletedWith}` : '',
  ].filter(Boolean);
  out.push(s.bold(`  # ${c.address} ${c.deletedOutside ? 'has been deleted' : headline[verb]}`) + (notes.length ? s.dim(` (${notes.join('; ')})`) : ''));
  if (c.movedFrom) out.push(s.dim(`  # (moved from ${c.movedFrom})`));
  if (c.replaceReason) out.push(s.dim(`  # ${c.replaceReason}`));
  out.push(`${verb === 'replace' ? '' : '  '}${symbol(verb, s)} ${c.address}${c.id ? s.dim(` [id=${c.id}]`) : ''}`);
  const forces = new Set(c.replacePaths ?? []);
  const mark = (path: string) => ([...forces].some((f) => path === f || path.startsWith(`${f}/`)) ? s.red(' # forces replacement') : '');
  const add = s.green('+');
  const del = s.red('-');
  if (verb === 'create') out.push(...documentLines(add, c.after ?? {}));
  // As Terraform's destroy: what a resource has, not the modules it never had.
  else if (verb === 'delete') out.push(...documentLines(del, Object.fromEntries(Object.entries(c.before ?? {}).filter(([, v]) => v !== null))));
  else {
    for (const op of c.patch) {
      const f = `${fieldOf(op.path)} = `;
      const was = get(c.before, op.path);
      if (op.op === 'add' || (op.op === 'replace' && was == null && !isScalar(op.value))) out.push(...valueLines(add, f, op.value, '      ', mark(op.path)));
      else if (op.op === 'remove' || (op.op === 'replace' && op.value == null && !isScalar(was))) out.push(...valueLines(del, f, was, '      ', mark(op.path)));
      else if (op.op === 'replace' && typeof was === 'string' && typeof op.value === 'string' && (isMultiline(was) || isMultiline(op.value))) out.push(...textDiffLines(s, f, was, op.value, mark(op.path)));
      else if (op.op === 'replace') out.push(`      ${s.yellow('~')} ${f}${value(was)} -> ${value(op.value)}${mark(op.path)}`);
    }
  }
  if (c.sensitiveChanged) out.push(`      ${s.yellow('~')} ${s.dim('(sensitive value)')}${c.replacePaths?.length && !c.patch.length ? s.red(' # forces replacement') : ''}`);
  // An update with no field to show rewrites the stamp alone (a document renamed, matched by
  // its natural key): say so, or the reader sees an update of nothing.
  else if (verb === 'update' && !c.patch.length) out.push(`      ${s.dim(`(no field changes: only edgeform's ownership stamp in metadata, which will record it as ${c.address}${c.movedFrom ? ` instead of ${c.movedFrom}` : ''})`)}`);
  if (c.tokenFile && c.actions.includes('create')) out.push(`      ${s.dim(`(the token, returned once, will be written to ${c.tokenFile})`)}`);
  return out;
}

export function renderPlan(plan: Plan, s: Style): string {
  const out: string[] = [];
  const active = plan.changes.filter((c) => !isNoop(c));
  if (plan.mode === 'refresh-only') {
    if (!active.length) out.push(s.green(s.bold('No changes.')) + ' No objects have changed outside edgeform.');
    else {
      out.push(s.bold('Objects have changed outside edgeform'), '', 'edgeform detected the following changes made outside edgeform since the last apply:', '');
      for (const c of active) out.push(...renderChange(c, s), '');
      out.push('Run "edgeform apply" to put them back as the manifests declare.');
    }
    out.push(...leftoverLines(plan, s), '', s.dim(`API calls: ${plan.apiCalls}`));
    return `${out.join('\n')}\n`;
  }
  const drift = active.filter((c) => c.drift);
  if (drift.length) {
    out.push(s.bold('Note: Objects have changed outside edgeform'), '', `${drift.map((c) => c.address).join(', ')} changed since the last apply; the plan below puts ${drift.length === 1 ? 'it' : 'them'} back.`, '');
  }
  if (!active.length) {
    out.push(`${s.green(s.bold('No changes.'))} Your infrastructure matches the configuration.`);
  } else {
    out.push('edgeform will perform the following actions:', '');
    for (const c of active) out.push(...renderChange(c, s), '');
    const { add, change, destroy } = summarize(active);
    out.push(s.bold(`Plan: ${add} to add, ${change} to change, ${destroy} to destroy.`));
  }
  out.push(...leftoverLines(plan, s), '', s.dim(`API calls: ${plan.apiCalls}`));
  return `${out.join('\n')}\n`;
}

/** The stack's resources that no manifest declares (every kind is read), left alone without --prune. */
function leftoverLines(plan: Plan, s: Style): string[] {
  const n = plan.orphans.length;
  if (!n) return [];
  return [
    '',
    s.yellow(`${n} resource${n === 1 ? ' is' : 's are'} managed by stack "${plan.stack}" but no longer declared: ${plan.orphans.join(', ')}.`),
    s.yellow(`Run with --prune to delete ${n === 1 ? 'it' : 'them'}, or declare ${n === 1 ? 'it' : 'them'} again. (plan --detailed-exitcode exits 3 while there are leftovers and no changes.)`),
  ];
}

const progressVerb: Record<Verb, [string, string, string]> = {
  create: ['Creating...', 'Creation complete', 'Creation failed'],
  update: ['Modifying...', 'Modifications complete', 'Modifications failed'],
  delete: ['Destroying...', 'Destruction complete', 'Destruction failed'],
  replace: ['Replacing...', 'Replacement complete', 'Replacement failed'],
  'no-op': ['', '', ''],
};

export const progressStart = (c: Change) => `${c.address}: ${progressVerb[verbOf(c)][0]}${c.id ? ` [id=${c.id}]` : ''}`;
export const progressDone = (c: Change, seconds: number, id?: string, tokenFile?: string) =>
  `${c.address}: ${progressVerb[verbOf(c)][1]} after ${Math.round(seconds)}s${id && verbOf(c) !== 'delete' ? ` [id=${id}]` : ''}${tokenFile ? `; token written to ${tokenFile}` : ''}`;

/** A failure as it happens, in brief: the error itself is listed once, with the others, after the run. */
export const progressFailed = (c: Change, f: Failure) => `${c.address}: ${progressVerb[verbOf(c)][2]}${f.status ? ` (HTTP ${f.status}${f.errorCode ? ` ${f.errorCode}` : ''})` : ''}`;

/** Terraform's "Still creating... [10s elapsed]": a long wait (a rate limit) is not a hang. */
export const progressStill = (c: Change, seconds: number) => {
  const verb = progressVerb[verbOf(c)][0];
  return `${c.address}: Still ${verb.charAt(0).toLowerCase()}${verb.slice(1)}${c.id ? ` [id=${c.id}]` : ''} [${Math.round(seconds)}s elapsed]`;
};

export function failureText(f: Failure): string {
  const code = f.errorCode ? ` ${f.errorCode}` : '';
  return `${f.address}: ${f.operation.method} failed${f.status ? ` (HTTP ${f.status}${code})` : ''}: ${f.message}${f.operationId ? ` (operation ${f.operationId})` : ''}`;
}

export function renderApplyResult(mode: Plan['mode'], result: ExecuteResult, s: Style): string {
  const counts = summarize(result.done);
  const out: string[] = [];
  for (const f of result.failures) out.push(s.red(`Error: ${failureText(f)}`));
  if (result.skipped.length) out.push(s.yellow(`Not attempted, because something they depend on failed: ${result.skipped.join(', ')}`));
  if (result.notDone) {
    // Stopped by an interrupt: what was done, and what is left for the next run.
    const verb = mode === 'destroy' ? 'Destroy' : 'Apply';
    if (result.notDone.length) out.push(s.yellow(`Not done, because the run was interrupted: ${result.notDone.join(', ')}`));
    const failed = result.failures.length ? ` ${result.failures.length} operation${result.failures.length === 1 ? '' : 's'} failed.` : '';
    out.push('', s.red(s.bold(`${verb} interrupted: ${result.notDone.length} change${result.notDone.length === 1 ? '' : 's'} not done.${failed}`)) + ` ${counts.add} added, ${counts.change} changed, ${counts.destroy} destroyed before that. Run ${mode === 'destroy' ? 'destroy' : 'apply'} again to finish.`);
  } else if (result.failures.length) {
    out.push('', s.red(s.bold(`Apply failed: ${result.failures.length} operation${result.failures.length === 1 ? '' : 's'} failed.`)) + ` ${counts.add} added, ${counts.change} changed, ${counts.destroy} destroyed before that. Fix the cause and run apply again to finish.`);
  } else if (mode === 'destroy') {
    out.push(s.green(s.bold(`Destroy complete! Resources: ${counts.destroy} destroyed.`)));
  } else {
    out.push(s.green(s.bold(`Apply complete! Resources: ${counts.add} added, ${counts.change} changed, ${counts.destroy} destroyed.`)));
  }
  return `${out.join('\n')}\n`;
}
