// The traffic-policy document: parsed from YAML or JSON and checked rule by rule. The
// traffic-policy engine reuses this module, so it knows nothing of HTTP or the catalog.
import { parseBoundedYaml } from './bounded-parse.js';

export const PHASES = ['on_http_request', 'on_http_response', 'on_tcp_connect'] as const;
export type Phase = (typeof PHASES)[number];

export interface RateLimitConfig {
  name: string;
  algorithm: 'sliding_window';
  capacity: number;
  /** The rate period in seconds. */
  rate: number;
  bucket_key: string[];
}

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

const HEADER_TOKEN = "[!#$%&*+\\-.^_`|~0-9A-Za-z]+";
const BUCKET_KEY = new RegExp(
  `^(req\\.host|conn\\.client_ip|req\\.headers\\[(['"])${HEADER_TOKEN}\\2\\]|getReqHeader\\((['"])${HEADER_TOKEN}\\3\\))$`,
);

type Check = (config: Record<string, unknown>, path: string, issues: PolicyIssue[], phase: Phase) => void;

function rateLimit(config: Record<string, unknown>, path: string, issues: PolicyIssue[], phase: Phase) {
  const at = (k: string) => join(path, k);
  if (phase === 'on_tcp_connect') issues.push({ path, message: 'rate-limit runs only in on_http_request and on_http_response' });
  const allowed = ['name', 'algorithm', 'capacity', 'rate', 'bucket_key'];
  for (const k of Object.keys(config)) {
    if (!allowed.includes(k)) issues.push({ path: at(k), message: `unknown rate-limit field "${k}"; fields are ${allowed.join(', ')}` });
  }
  const { name, algorithm, capacity, rate, bucket_key: keys } = config;
  if (typeof name !== 'string' || name.length === 0) issues.push({ path: at('name'), message: 'name is required (a string)' });
  else if ([...name].length >= 1024) issues.push({ path: at('name'), message: 'name must be fewer than 1024 characters' });
  if (algorithm !== 'sliding_window') issues.push({ path: at('algorithm'), message: 'algorithm is required and must be "sliding_window"' });
  if (typeof capacity !== 'number' || !Number.isInteger(capacity) || capacity < 1 || capacity > 2_000_000_000) {
    issues.push({ path: at('capacity'), message: 'capacity is required: an integer from 1 to 2000000000' });
  }
  const seconds = typeof rate === 'string' ? parseDuration(rate) : undefined;
  if (seconds === undefined) {
    issues.push({ path: at('rate'), message: 'rate is required: a duration such as "60s", "10m" or "1h"' });
  } else if (seconds % 10 !== 0 || seconds < 60 || seconds > 86400) {
    issues.push({ path: at('rate'), message: `rate "${String(rate)}" must be a multiple of 10s from 60s to 24h` });
  }
  if (!Array.isArray(keys) || keys.length === 0 || keys.length > 10) {
    issues.push({ path: at('bucket_key'), message: 'bucket_key is required: a list of 1 to 10 entries' });
  } else {
    keys.forEach((k, i) => {
      if (typeof k !== 'string' || !BUCKET_KEY.test(k.trim())) {
        issues.push({
          path: join(at('bucket_key'), i),
          message: `bucket_key entry ${JSON.stringify(k)} must be req.host, conn.client_ip, req.headers['<name>'] or getReqHeader('<Name>')`,
        });
      }
    });
  }
}

/** Per-action checks; action types not listed are kept as given. */
const actionChecks: Record<string, Check> = { 'rate-limit': rateLimit };

function checkRule(rule: unknown, path: string, issues: PolicyIssue[], phase: Phase): PolicyRule | undefined {
  if (!isObject(rule)) {
    issues.push({ path, message: 'a rule is an object with actions (and optional name and expressions)' });
    return undefined;
  }
  for (const k of Object.keys(rule)) {
    if (!['name', 'expressions', 'actions'].includes(k)) issues.push({ path: join(path, k), message: `unknown rule field "${k}"; fields are name, expressions, actions` });
  }
  if (rule.name !== undefined && typeof rule.name !== 'string') issues.push({ path: join(path, 'name'), message: 'name must be a string' });
  const expressions = rule.expressions ?? [];
  if (!Array.isArray(expressions) || expressions.some((e) => typeof e !== 'string')) {
    issues.push({ path: join(path, 'expressions'), message: 'expressions must be a list of strings' });
  }
  if (!Array.isArray(rule.actions) || rule.actions.length === 0) {
    issues.push({ path: join(path, 'actions'), message: 'actions is required: a non-empty list of {type, config}' });
    return undefined;
  }
  const actions: PolicyAction[] = [];
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
    actionChecks[action.type]?.(config, join(at, 'config'), issues, phase);
    actions.push({ type: action.type, config });
  });
  return { ...(typeof rule.name === 'string' ? { name: rule.name } : {}), expressions: expressions as string[], actions };
}

export interface PolicyOptions {
  /** Phases allowed where the policy is attached (all of PHASES when absent). */
  phases?: readonly Phase[];
}

/** Parses and validates a traffic policy given as YAML or JSON text. */
export function parseTrafficPolicy(text: string, opts: PolicyOptions = {}): PolicyResult {
  const phases = opts.phases ?? PHASES;
  const parsed = parseBoundedYaml(text);
  if (!parsed.ok) return { ok: false, issues: [{ path: '', message: parsed.message }] };
  const value: unknown = parsed.value ?? {};
  if (!isObject(value)) return { ok: false, issues: [{ path: '', message: `a traffic policy is a mapping of phases (${PHASES.join(', ')})` }] };
  const issues: PolicyIssue[] = [];
  const policy: TrafficPolicy = {};
  for (const [key, rules] of Object.entries(value)) {
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
    policy[key as Phase] = rules.map((r, i) => checkRule(r, join(key, i), issues, key as Phase)).filter((r): r is PolicyRule => !!r);
  }
  return issues.length ? { ok: false, issues } : { ok: true, policy };
}

/** The rate-limit configs of a valid policy in a phase, with `rate` in seconds. */
export function rateLimits(policy: TrafficPolicy, phase: Phase): RateLimitConfig[] {
  return (policy[phase] ?? []).flatMap((rule) =>
    rule.actions
      .filter((a) => a.type === 'rate-limit')
      .map((a) => ({ ...(a.config as unknown as RateLimitConfig), rate: parseDuration(String(a.config.rate))! })),
  );
}
