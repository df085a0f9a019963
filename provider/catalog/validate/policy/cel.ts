// CEL for traffic-policy expressions: one environment per phase, declaring exactly the
// variables of that phase (variables.ts), so an expression is type-checked when the policy
// is compiled and an unknown variable, a misspelt field or `req.method == 1` is a problem
// with its column, not a surprise per request.
import { Environment } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';
import type { Phase } from '../traffic-policy.js';
import { registerFunctions } from './functions.js';
import { celSchema, GEO_PREFIXES, OWN_VALUE, variablesOf, type VarTree } from './variables.js';

/**
 * The request and response the helpers `getReqHeader('Name')`, `getQueryParam`, `getReqCookie`,
 * ... read (functions.ts). A CEL function sees only its arguments, and evaluation is
 * synchronous, so the engine points these at the message being evaluated just before it
 * runs a phase's expressions.
 */
export { lookups } from './functions.js';

/**
 * `matches` runs on RE2 (re2js), in time linear in the input. The library's own `matches`
 * is a JavaScript RegExp, which backtracks: `^(a+)+$` against a header of 40 `a` and a `!`
 * ran for minutes and stopped the whole server, API and ingress alike, and any client can
 * send that header. The library cannot replace a built-in overload, so the parsed
 * expression's `matches` calls are pointed at this one before they are checked.
 */
const RE2_MATCHES = 'matches_re2';
const patterns = new Map<string, { re: RE2JS; size: number }>();
/** The longest pattern `matches` compiles: RE2 compiles in time linear in the pattern, and a header-sized one (`a{1000}` 2,000 times) took seconds. */
export const MAX_MATCHES_PATTERN = 1024;
/**
 * The largest RE2 program a `matches` pattern may compile to (re2js's programSize, about one
 * instruction per character, class or repetition copy: `[a-z]{1,63}` is 135). Counted
 * repetitions multiply: `(?i)(a{30}){30}b` is 15 characters and 963 instructions.
 */
export const MAX_MATCHES_PROGRAM = 2_000;
/**
 * What one evaluation's `matches` calls may cost together, in RE2 program instructions times
 * input characters. re2js runs in time linear in the input, but when its lazy DFA gives up the
 * cost of a character grows with the program: measured up to 320 ns per unit (a 963-instruction
 * pattern against an 8 KiB header: 1.5 s). 100,000 units stay under about 32 ms at that worst
 * rate (typical patterns run a hundred times faster): a 20-instruction pattern over a 5,000
 * character header, a 1,000-instruction one over a 100-character path. A call that would
 * spend more than is left is not run and fails with OVER_MATCH_BUDGET; later calls that fit in
 * what is left run as usual.
 */
export const MAX_MATCHES_COST = 100_000;

/** What the evaluation under way may still spend on `matches`, and how many calls it refused (the engine sets it per evaluation; unlimited outside). */
export const matchBudget = { left: Infinity, refused: 0 };
const OVER_MATCH_BUDGET = new Error(`this matches() call would take the evaluation's matches() calls over ${MAX_MATCHES_COST.toLocaleString('en-US')} units of pattern size times input length (see the limits in docs/traffic-policy.md)`);
export const overMatchBudget = () => OVER_MATCH_BUDGET;

/** A pattern compiled for `matches`, or why it cannot be (its length, its syntax, its program size). */
function compilePattern(pattern: string): { re: RE2JS; size: number } | string {
  const known = patterns.get(pattern);
  if (known) return known;
  if (pattern.length > MAX_MATCHES_PATTERN) return `a matches() pattern is at most ${MAX_MATCHES_PATTERN} characters; this one has ${pattern.length}`;
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (e) {
    return `invalid RE2 pattern ${JSON.stringify(pattern.slice(0, 100))}: ${(e as Error).message}`;
  }
  const size = re.programSize();
  if (size > MAX_MATCHES_PROGRAM) return `the matches() pattern ${JSON.stringify(pattern.slice(0, 100))} compiles to ${size} RE2 instructions, over the ${MAX_MATCHES_PROGRAM} allowed (counted repetitions multiply: (a{100}){10} is about 1,000)`;
  if (patterns.size >= 256) patterns.clear();
  const entry = { re, size };
  patterns.set(pattern, entry);
  return entry;
}

function re2Matches(text: string, pattern: string): boolean {
  const c = compilePattern(pattern);
  if (typeof c === 'string') throw new Error(c);
  // Charged before it runs; a call that does not fit in what is left is not run.
  const cost = c.size * Math.max(1, text.length);
  if (cost > matchBudget.left) {
    matchBudget.refused++;
    throw OVER_MATCH_BUDGET;
  }
  matchBudget.left -= cost;
  return c.re.matcher(text).find();
}

/** The most steps an expression's macros (all, exists, exists_one, map, filter) may take, as estimated when it is compiled, and the most iterations an evaluation's macros may run. */
export const MAX_MACRO_STEPS = 100_000;

interface Node { op: string; args: unknown; meta?: { alternate?: Comprehension }; clone(op: unknown, args: unknown): Node }
interface Comprehension extends Node { args: { iterable: Node } }

/**
 * Rewrites a parsed expression for the engine: every `x.matches(p)` is pointed at the RE2
 * overload, and every macro's range is passed through MACRO_RANGE, which counts its
 * elements against the evaluation's budget (iteratively: the tree may be deep).
 */
function rewrite(root: unknown) {
  const stack: unknown[] = [root];
  while (stack.length) {
    const v = stack.pop();
    if (Array.isArray(v)) stack.push(...v);
    else if (v && typeof v === 'object' && typeof (v as Node).op === 'string') {
      const node = v as Node;
      if (node.op === 'rcall' && Array.isArray(node.args) && node.args[0] === 'matches') {
        node.args[0] = RE2_MATCHES;
        // A literal pattern is compiled now: one RE2 refuses or that is too costly is a problem with its column.
        const pattern = (node.args[2] as Node[] | undefined)?.[0] as (Node & { start?: number; end?: number }) | undefined;
        if (pattern?.op === 'value' && typeof pattern.args === 'string') {
          const c = compilePattern(pattern.args);
          if (typeof c === 'string') throw Object.assign(new Error(c), { range: { start: pattern.start ?? 0, end: pattern.end ?? 0 } });
        }
      }
      // A macro is expanded when parsed into a comprehension, kept beside the call.
      const loop = node.meta?.alternate;
      if (loop?.op === 'comprehension' && !isBudgeted(loop.args.iterable)) loop.args.iterable = budgeted(loop.args.iterable);
      if (node.op !== 'value') stack.push(node.args);
    } else if (v && Object.getPrototypeOf(v) === Object.prototype) {
      stack.push(...Object.values(v)); // a comprehension's parts
    }
  }
}

/**
 * What an evaluation may still spend on macro iterations. A nested macro over a request's
 * headers (`req.headers.all(k, req.headers.exists(j, ...))`) iterates the square of their
 * count, and a client chooses that count: the compile-time estimate assumes a range of 100,
 * the budget holds whatever the request brings. Each macro's range is charged in full
 * before the macro runs (whether or not it stops early), so an evaluation does at most
 * `MAX_MACRO_STEPS` iterations; past it every macro fails at once, and the engine counts
 * the expression that ran over, and any later one that needs a macro, as an error (false).
 * Unlimited outside the engine's evaluations (the engine sets it per evaluation).
 */
export const macroBudget = { left: Infinity };

const MACRO_RANGE = 'macro_range';

/** The error of an evaluation over the macro budget: one object, thrown again by every macro after (no stack trace to capture each time). */
const OVER_BUDGET = new Error(`the evaluation's macros ran over ${MAX_MACRO_STEPS.toLocaleString('en-US')} iterations (see the limits in docs/traffic-policy.md)`);
export const overMacroBudget = () => OVER_BUDGET;

function chargeRange<T>(range: T): T {
  // Spent: fail before counting (a map's keys are counted by listing them, in time linear in its size).
  if (macroBudget.left < 0) throw overMacroBudget();
  const size = Array.isArray(range) ? range.length : range instanceof Map || range instanceof Set ? range.size : Object.keys(range as object).length;
  macroBudget.left -= size;
  if (macroBudget.left < 0) throw overMacroBudget();
  return range;
}

/** The parser's call node, taken from a parsed template (the library does not export its operators). */
let callOp: { name: string; check: unknown; evaluate: unknown } | undefined;
const isBudgeted = (n: Node) => n.op === 'call' && Array.isArray(n.args) && n.args[0] === MACRO_RANGE;
function budgeted(range: Node): Node {
  if (!callOp) {
    const template = (envOf('on_tcp_connect').parse(`${MACRO_RANGE}([])`) as unknown as { ast: Node & { meta: { check: unknown; evaluate: unknown } } }).ast;
    callOp = { name: 'call', check: template.meta.check, evaluate: template.meta.evaluate };
  }
  return range.clone(callOp, [MACRO_RANGE, [range]]);
}

/** What a range that is not a literal (a request's headers, a query parameter's values) is assumed to hold. */
const ASSUMED_RANGE = 100;
const MACROS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);

const isNode = (v: unknown): v is Node => !!v && typeof v === 'object' && typeof (v as Node).op === 'string';

/** How many elements a macro's range holds: a literal's count, a map or filter of a literal its count, else ASSUMED_RANGE. */
function rangeSize(node: Node): number {
  if ((node.op === 'list' || node.op === 'map') && Array.isArray(node.args)) return node.args.length;
  if (node.op === 'rcall' && Array.isArray(node.args) && (node.args[0] === 'map' || node.args[0] === 'filter') && isNode(node.args[1])) return rangeSize(node.args[1]);
  return ASSUMED_RANGE;
}

/**
 * The steps an expression's macros take: a macro's range times the steps of its body, so
 * nested macros multiply. Three literal lists of 600 nested in `all` took 9 s of the one
 * thread that serves every request; the parser's node limit allows far worse.
 */
function macroSteps(v: unknown): number {
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + macroSteps(x), 0);
  if (!isNode(v)) return v && Object.getPrototypeOf(v) === Object.prototype ? macroSteps(Object.values(v)) : 0;
  if (v.op === 'value') return 0;
  const a = v.args;
  if (v.op === 'rcall' && Array.isArray(a) && MACROS.has(a[0] as string) && isNode(a[1]) && Array.isArray(a[2]) && a[2].length >= 2) {
    return macroSteps(a[1]) + rangeSize(a[1]) * (1 + macroSteps(a[2].slice(1)));
  }
  return macroSteps(a);
}

/**
 * A string-and-object variable (the service's `req.url`, `req.user_agent`,
 * `conn.tls.client.subject`, ...; a `''` entry in variables.ts) read whole is read as its own
 * value: `req.url == 'https://a/'` reads the hidden sibling `req.url$` (a name no expression
 * can spell), while `req.url.path` and `req.url['path']` read the group. The parsed
 * expression is rewritten before it is checked, so the checker types each use as it is meant.
 */
function rewriteOwnValues(root: unknown, tree: VarTree) {
  const seen = new Set<unknown>();
  const stack: [unknown, Node | undefined][] = [[root, undefined]];
  while (stack.length) {
    const [v, parent] = stack.pop()!;
    if (Array.isArray(v)) {
      for (const x of v) stack.push([x, parent]);
      continue;
    }
    if (!v || typeof v !== 'object' || seen.has(v)) continue;
    seen.add(v);
    if (!isNode(v)) {
      if (Object.getPrototypeOf(v) === Object.prototype) for (const x of Object.values(v)) stack.push([x, parent]);
      continue;
    }
    if (v.op === '.' && Array.isArray(v.args) && typeof v.args[1] === 'string') {
      const group = groupAt(v, tree);
      const selected = parent && (parent.op === '.' || parent.op === '[]' || parent.op === '.?' || parent.op === '[?]') && Array.isArray(parent.args) && parent.args[0] === v;
      if (group && typeof group[''] === 'string' && !selected) v.args[1] = `${v.args[1]}${OWN_VALUE}`;
    }
    const loop = v.meta?.alternate;
    if (loop) stack.push([loop, undefined]);
    if (v.op !== 'value') stack.push([v.args, v]);
  }
}

/** The variable group a chain of field selections from a variable names (`req.url`), or undefined. */
function groupAt(node: Node, tree: VarTree): VarTree | undefined {
  const names: string[] = [];
  let n: Node = node;
  while (n.op === '.' && Array.isArray(n.args) && typeof n.args[1] === 'string' && isNode(n.args[0])) {
    names.unshift(n.args[1]);
    n = n.args[0];
  }
  if (n.op !== 'id' || typeof n.args !== 'string') return undefined;
  let t: string | VarTree | undefined = tree[n.args];
  for (const name of names) t = typeof t === 'object' ? t[name] : undefined;
  return typeof t === 'object' ? t : undefined;
}

const trees = new Map<Phase, VarTree>();

/** Parses an expression in an environment of celEnvironment, with `matches` on RE2 and macros on the budget; throws as the library's parse does. */
export function parseCel(env: Environment, text: string, phase?: Phase): ReturnType<Environment['parse']> {
  const parsed = env.parse(text);
  const ast = (parsed as unknown as { ast: unknown }).ast;
  rewrite(ast);
  const p = phase ?? phaseOf.get(env);
  if (p) rewriteOwnValues(ast, trees.get(p) ?? trees.set(p, variablesOf(p)).get(p)!);
  return parsed;
}

const phaseOf = new WeakMap<Environment, Phase>();

/** The CEL environment of a phase (the conformance tests run expressions in it too). */
export function celEnvironment(phase: Phase): Environment {
  const env = new Environment({ homogeneousAggregateLiterals: false, limits: { maxAstNodes: 2000, maxDepth: MAX_DEPTH } });
  for (const [name, tree] of Object.entries(variablesOf(phase))) {
    if (typeof tree === 'string') env.registerVariable(name, tree);
    else env.registerVariable({ name, schema: celSchema(tree) } as never);
  }
  env.registerFunction(`string.${RE2_MATCHES}(string): bool`, re2Matches);
  env.registerFunction(`${MACRO_RANGE}(list<A>): list<A>`, chargeRange);
  env.registerFunction(`${MACRO_RANGE}(map<K, V>): map<K, V>`, chargeRange);
  registerFunctions(env, phase !== 'on_tcp_connect', phase === 'on_http_response');
  phaseOf.set(env, phase);
  return env;
}

/** How deep an expression may nest; the parser counts brackets, calls and members itself. */
const MAX_DEPTH = 50;

/**
 * The 0-based offset where a run of more than MAX_DEPTH unary operators (`!!!…x`, `- - -…1`)
 * starts, outside string literals, or -1. The parser's depth limit does not count unary
 * operators, and parses each one by recursion: 20,000 of them overflowed its stack, and a
 * run under its node limit still nests that deep in the checker and the evaluator.
 */
function unaryRunStart(text: string): number {
  let run = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"' || c === "'") {
      const raw = /[rR]/.test(text[i - 1] ?? '') || /[rR]/.test(text[i - 2] ?? '');
      const quote = text.startsWith(c.repeat(3), i) ? c.repeat(3) : c;
      let j = i + quote.length;
      while (j < text.length && !text.startsWith(quote, j)) j += text[j] === '\\' && !raw ? 2 : 1;
      i = j + quote.length - 1;
      run = 0;
    } else if (c === '!' || c === '-') {
      if (run++ === 0) start = i;
      if (run > MAX_DEPTH) return start;
    } else if (!/\s/.test(c)) {
      run = 0;
    }
  }
  return -1;
}

const environments = new Map<Phase, Environment>();
const envOf = (phase: Phase) => environments.get(phase) ?? environments.set(phase, celEnvironment(phase)).get(phase)!;

/** A compiled expression: call it with the phase's variables; it returns the value or throws. */
export type CelProgram = (vars: object) => unknown;

export type ExpressionResult = { ok: true; program: CelProgram } | { ok: false; column: number; message: string };

/** The dotted name that ends where the checker stopped (`req.headrs`), to name it whole. */
function nameEndingAt(text: string, end: number): string {
  let start = end;
  while (start > 0 && /[A-Za-z0-9_.]/.test(text[start - 1])) start--;
  return text.slice(start, end);
}

function explain(text: string, error: Error & { range?: { start: number; end: number } }, phase: Phase): { column: number; message: string } {
  const start = error.range?.start ?? 0;
  let message = error.message.split('\n')[0].replaceAll(RE2_MATCHES, 'matches').replace(/(\w)\$(?=\W|$)/g, '$1');
  const unknown = /^(?:No such key|Unknown variable): /.exec(message);
  if (unknown) {
    const name = nameEndingAt(text, error.range?.end ?? start);
    const geo = GEO_PREFIXES.find((p) => name === p || name.startsWith(p.endsWith('_') ? p : `${p}.`));
    message = geo
      ? `${name} needs a MaxMind-format geography or IP-intelligence database, which this server has not been given (--geoip-db PATH, EDGEFORM_GEOIP_DB); see docs/traffic-policy.md`
      : `unknown variable ${name} in ${phase} (see docs/traffic-policy.md for the variables)`;
  }
  return { column: start + 1, message };
}

/** Parses and type-checks one expression for a phase; it must give a bool (or, with `anyType`, any value: an interpolation). */
export function compileExpression(text: string, phase: Phase, anyType = false): ExpressionResult {
  const env = envOf(phase);
  const unary = unaryRunStart(text);
  if (unary >= 0) return { ok: false, column: unary + 1, message: `more than ${MAX_DEPTH} unary operators in a row (an expression nests at most ${MAX_DEPTH} deep)` };
  let parsed: ReturnType<Environment['parse']>;
  let checked: ReturnType<ReturnType<Environment['parse']>['check']>;
  try {
    parsed = parseCel(env, text);
    checked = parsed.check();
    const steps = macroSteps((parsed as unknown as { ast: unknown }).ast);
    if (steps > MAX_MACRO_STEPS) {
      return { ok: false, column: 1, message: `the expression's macros would take about ${steps.toLocaleString('en-US')} steps, over the ${MAX_MACRO_STEPS.toLocaleString('en-US')} allowed (nested macros multiply; a range that is not a literal counts as ${ASSUMED_RANGE})` };
    }
  } catch (e) {
    // A stack overflow left in the library is the expression's fault, never a 500.
    if (e instanceof RangeError) return { ok: false, column: 1, message: `the expression nests too deeply (at most ${MAX_DEPTH} levels)` };
    return { ok: false, ...explain(text, e as Error, phase) };
  }
  if (!checked.valid) return { ok: false, ...explain(text, checked.error as Error, phase) };
  if (!anyType && checked.type !== 'bool' && checked.type !== 'dyn') return { ok: false, column: 1, message: `an expression must give a bool; this one gives ${checked.type}` };
  return { ok: true, program: parsed as unknown as CelProgram };
}
