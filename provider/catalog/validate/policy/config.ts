// Small readers shared by the action configs: each adds a problem at the field's path and
// returns undefined when the value breaks its rule, so one pass reports every problem.
import { headerNameProblem, headerValueProblem } from '../http.js';
import type { PolicyIssue } from '../traffic-policy.js';

export const at = (path: string, key: string | number) => (typeof key === 'number' ? `${path}[${key}]` : `${path}.${key}`);

export interface ConfigContext { config: Record<string, unknown>; path: string; issues: PolicyIssue[]; type: string }

/** Refuses fields the action does not know, naming those it does. */
export function onlyFields(c: ConfigContext, fields: readonly string[]) {
  for (const k of Object.keys(c.config)) {
    if (!fields.includes(k)) c.issues.push({ path: at(c.path, k), message: `unknown ${c.type} field "${k}"; fields are ${fields.join(', ') || 'none'}` });
  }
}

export function problem(c: ConfigContext, key: string | number | undefined, message: string): undefined {
  c.issues.push({ path: key === undefined ? c.path : at(c.path, key), message });
  return undefined;
}

/** An HTTP status code among `allowed` (a range or a list), `fallback` when absent. */
export function statusCode(c: ConfigContext, key: string, range: [number, number] | readonly number[], fallback?: number): number | undefined {
  const v = c.config[key];
  if (v === undefined && fallback !== undefined) return fallback;
  const isRange = range.length === 2 && range[1] - range[0] > 1;
  const rule = isRange ? `an integer from ${range[0]} to ${range[1]}` : `one of ${range.join(', ')}`;
  if (v === undefined) return problem(c, key, `${key} is required: ${rule}`);
  const ok = typeof v === 'number' && Number.isInteger(v) && (isRange ? v >= range[0] && v <= range[1] : range.includes(v));
  return ok ? (v as number) : problem(c, key, `${key} ${JSON.stringify(v)} must be ${rule}`);
}

export function text(c: ConfigContext, key: string, opts: { required?: boolean; max?: number } = {}): string | undefined {
  const v = c.config[key];
  if (v === undefined) return opts.required ? problem(c, key, `${key} is required (a string)`) : undefined;
  if (typeof v !== 'string') return problem(c, key, `${key} must be a string`);
  if (opts.max !== undefined && v.length > opts.max) return problem(c, key, `${key} must be at most ${opts.max} characters`);
  return v;
}

/** A map of header names to values (`{x-a: "1"}`); names are kept as written. */
export function headerMap(c: ConfigContext, key: string, required: boolean): Record<string, string> | undefined {
  const v = c.config[key];
  if (v === undefined) return required ? problem(c, key, `${key} is required: a map of header names to values`) : {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return problem(c, key, `${key} must be a map of header names to values`);
  const entries = Object.entries(v);
  if (required && entries.length === 0) return problem(c, key, `${key} must name at least one header`);
  let ok = true;
  for (const [name, value] of entries) {
    const why = headerNameProblem(name) ?? (typeof value !== 'string' ? `the value of ${name} must be a string` : headerValueProblem(value));
    if (why) ok = !!problem(c, `${key}.${name}`, why);
  }
  return ok ? (v as Record<string, string>) : undefined;
}

/** A non-empty list of header names. */
export function headerNames(c: ConfigContext, key: string): string[] | undefined {
  const v = c.config[key];
  if (!Array.isArray(v) || v.length === 0) return problem(c, key, `${key} is required: a non-empty list of header names`);
  let ok = true;
  v.forEach((name, i) => {
    const why = typeof name !== 'string' ? 'a header name is a string' : headerNameProblem(name);
    if (why) ok = !!(c.issues.push({ path: at(at(c.path, key), i), message: why }), false);
  });
  return ok ? (v as string[]) : undefined;
}
