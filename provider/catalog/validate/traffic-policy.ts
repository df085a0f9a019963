// The traffic-policy document: parsed from YAML or JSON (bounded before the parser sees it),
// checked and compiled rule by rule (expressions in CEL, configs by their action in
// policy/actions/). The traffic-policy engine (server/policy/) runs what this compiles, so it
// knows nothing of HTTP or the catalog.
import { parseBoundedYaml } from './bounded-parse.js';
import { ACTION_TYPES, actionByType } from './policy/actions/index.js';
import { compileExpression, type CelProgram } from './policy/cel.js';
import { compileTemplate, hasInterpolation, type Template } from './policy/template.js';
import { didYouMean } from './suggest.js';

export const PHASES = ['on_http_request', 'on_http_response', 'on_tcp_connect'] as const;
export type Phase = (typeof PHASES)[number];

export interface PolicyAction { type: string; config: Record<string, unknown> }
export interface PolicyRule { name?: string; expressions: string[]; actions: PolicyAction[] }
export type TrafficPolicy = Partial<Record<Phase, PolicyRule[]>>;

/** A problem inside the policy, with the JSON path of the offending field. */
export interface PolicyIssue { path: string; message: string }

export type PolicyResult = { ok: true; policy: TrafficPolicy } | { ok: false; issues: PolicyIssue[] };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const join = (base: string, key: string | number) => (typeof key === 'number' ? `${base}[${key}]` : base ? `${base}.${key}` : key);

/** Parses Go-style durations (`90s`, `10m`, `1h30m`, `1.5h`) into seconds. */
export function parseDuration(text: string): number | undefined {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text))) {
    total += Number(m[1]) * units[m[2]];
    matched = re.lastIndex;
  }
  return matched === text.length && text.length > 0 ? Math.round(total * 1000) / 1000 : undefined;
}

/** A rule as the engine runs it: expressions type-checked and compiled, configs typed. */
export interface CompiledRule {
  /** The rule's index in its phase, for messages. */
  index: number;
  name?: string;
  expressions: { text: string; program: CelProgram }[];
  actions: CompiledAction[];
}
export interface CompiledAction {
  type: string;
  config: unknown;
  /** The compiled `${expr}` strings of its configuration, by their text (the runner expands a field through them). */
  templates: Map<string, Template>;
}
export type CompiledRules = Partial<Record<Phase, CompiledRule[]>>;

export type CompileResult = { ok: true; policy: TrafficPolicy; compiled: CompiledRules } | { ok: false; issues: PolicyIssue[] };

function unknownType(type: string): string {
  // The module-* actions (a route's modules, as `edgeform policy show` prints them) are left out of the list: a policy written by hand uses the others.
  return `unknown action type "${type}"${didYouMean(type, ACTION_TYPES)}; supported types: ${ACTION_TYPES.filter((t) => !t.startsWith('module-')).join(', ')}`;
}

function compileAction(type: string, config: Record<string, unknown>, path: string, issues: PolicyIssue[], phase: Phase): CompiledAction | undefined {
  const def = actionByType.get(type);
  if (!def) {
    issues.push({ path: join(path, 'type'), message: unknownType(type) });
    return undefined;
  }
  if (!def.phases.includes(phase)) {
    issues.push({ path: join(path, 'type'), message: `${type} runs only in ${def.phases.join(' and ')}, not in ${phase}` });
    return undefined;
  }
  const templates = new Map<string, Template>();
  const before = issues.length;
  if (!def.literal) compileTemplates(config, join(path, 'config'), phase, new Set(def.expressionFields ?? []), templates, issues);
  const typed = def.check({ config, path: join(path, 'config'), issues, type }, phase);
  return typed === undefined || issues.length > before ? undefined : { type, config: typed, templates };
}

/** Compiles every `${expr}` in the strings of a configuration (at any depth), but for the fields that are expressions themselves (rate-limit's bucket_key). */
function compileTemplates(value: unknown, path: string, phase: Phase, skip: Set<string>, out: Map<string, Template>, issues: PolicyIssue[], depth = 0): void {
  if (typeof value === 'string') {
    if (!hasInterpolation(value) || out.has(value)) return;
    const r = compileTemplate(value, phase);
    if (r.ok) out.set(value, r.template!);
    else issues.push({ path, message: `${path} column ${r.column}: ${r.message}` });
    return;
  }
  if (depth > 20 || !value || typeof value !== 'object') return;
  if (Array.isArray(value)) value.forEach((v, i) => compileTemplates(v, join(path, i), phase, skip, out, issues, depth + 1));
  else for (const [k, v] of Object.entries(value)) if (!(depth === 0 && skip.has(k))) compileTemplates(v, join(path, k), phase, skip, out, issues, depth + 1);
}

function checkRule(rule: unknown, path: string, issues: PolicyIssue[], phase: Phase, index: number): [PolicyRule, CompiledRule] | undefined {
  if (!isObject(rule)) {
    issues.push({ path, message: 'a rule is an object with actions (and optional name and expressions)' });
    return undefined;
  }
  for (const k of Object.keys(rule)) {
    if (!['name', 'expressions', 'actions'].includes(k)) issues.push({ path: join(path, k), message: `unknown rule field "${k}"; fields are name, expressions, actions` });
  }
  if (rule.name !== undefined && typeof rule.name !== 'string') issues.push({ path: join(path, 'name'), message: 'name must be a string' });
  const expressions = rule.expressions ?? [];
  const programs: CompiledRule['expressions'] = [];
  if (!Array.isArray(expressions) || expressions.some((e) => typeof e !== 'string')) {
    issues.push({ path: join(path, 'expressions'), message: 'expressions must be a list of strings' });
  } else {
    const named = `${path}${typeof rule.name === 'string' && rule.name ? ` (${rule.name})` : ''}`;
    expressions.forEach((text: string, i) => {
      const r = compileExpression(text, phase);
      if (r.ok) programs.push({ text, program: r.program });
      else issues.push({ path: join(join(path, 'expressions'), i), message: `${named} expressions[${i}] column ${r.column}: ${r.message}` });
    });
  }
  if (!Array.isArray(rule.actions) || rule.actions.length === 0) {
    issues.push({ path: join(path, 'actions'), message: 'actions is required: a non-empty list of {type, config}' });
    return undefined;
  }
  const actions: PolicyAction[] = [];
  const compiled: CompiledAction[] = [];
  rule.actions.forEach((action, i) => {
    const at = join(join(path, 'actions'), i);
    if (!isObject(action) || typeof action.type !== 'string' || action.type === '') {
      issues.push({ path: join(at, 'type'), message: 'an action needs a type (a string)' });
      return;
    }
    for (const k of Object.keys(action)) {
      if (!['type', 'config'].includes(k)) issues.push({ path: join(at, k), message: `unknown action field "${k}"; fields are type, config` });
    }
    const config = action.config ?? {};
    if (!isObject(config)) {
      issues.push({ path: join(at, 'config'), message: 'config must be an object' });
      return;
    }
    const done = compileAction(action.type, config, at, issues, phase);
    if (done) compiled.push(done);
    actions.push({ type: action.type, config });
  });
  const name = typeof rule.name === 'string' ? { name: rule.name } : {};
  return [{ ...name, expressions: expressions as string[], actions }, { index, ...name, expressions: programs, actions: compiled }];
}

export interface PolicyOptions {
  /** Phases allowed where the policy is attached (all of PHASES when absent). */
  phases?: readonly Phase[];
}

/** Parses and validates a traffic policy given as YAML or JSON text. */
export function parseTrafficPolicy(text: string, opts: PolicyOptions = {}): PolicyResult {
  const r = compileTrafficPolicy(text, opts);
  return r.ok ? { ok: true, policy: r.policy } : r;
}

/**
 * Parses, validates and compiles a traffic policy: the one checker behind the API's 400s,
 * `edgeform validate`, `terraform validate` and the engine (server/policy/).
 */
export function compileTrafficPolicy(text: string, opts: PolicyOptions = {}): CompileResult {
  const phases = opts.phases ?? PHASES;
  const parsed = parseBoundedYaml(text);
  if (!parsed.ok) return { ok: false, issues: [{ path: '', message: parsed.message }] };
  const value: unknown = parsed.value ?? {};
  if (!isObject(value)) return { ok: false, issues: [{ path: '', message: `a traffic policy is a mapping of phases (${PHASES.join(', ')})` }] };
  const issues: PolicyIssue[] = [];
  const policy: TrafficPolicy = {};
  const compiled: CompiledRules = {};
  for (const [key, rules] of Object.entries(value)) {
    if (key === 'on_event_stream_message') {
      // The service's phase for sse-find-replace: edgeform runs that action in on_http_response, on each message of an event-stream answer.
      issues.push({ path: key, message: 'the phase on_event_stream_message is not supported here: put its sse-find-replace actions in on_http_response, where edgeform applies them to each message of a text/event-stream answer (docs/traffic-policy.md)' });
      continue;
    }
    if (!(PHASES as readonly string[]).includes(key)) {
      issues.push({ path: key, message: `unknown phase "${key}"; phases are ${phases.join(', ')}` });
      continue;
    }
    if (!phases.includes(key as Phase)) {
      issues.push({ path: key, message: `phase "${key}" does not apply here; phases here are ${phases.join(', ')}` });
      continue;
    }
    if (!Array.isArray(rules)) {
      issues.push({ path: key, message: 'a phase holds a list of rules' });
      continue;
    }
    const checked = rules.map((r, i) => checkRule(r, join(key, i), issues, key as Phase, i)).filter((r) => !!r);
    policy[key as Phase] = checked.map(([r]) => r);
    compiled[key as Phase] = checked.map(([, c]) => c);
  }
  return issues.length ? { ok: false, issues } : { ok: true, policy, compiled };
}
