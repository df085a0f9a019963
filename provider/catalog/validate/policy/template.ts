// `${expr}` in an action's configuration: each string field may hold CEL expressions between
// `${` and `}`, type-checked when the policy is compiled (a problem names the field and the
// column in the string) and evaluated when the action runs, in the evaluation's budgets. The
// value is written as text: a string as it is, a number in decimal, a bool as true or false,
// a timestamp in RFC 3339, bytes as UTF-8, a list or map as JSON.
import type { Phase } from '../traffic-policy.js';
import { compileExpression, type CelProgram } from './cel.js';
import { toJson } from './functions.js';

/** A compiled template: call it with the phase's variables. `single`: the template is one interpolation and nothing else, this its expression (its value keeps its type). */
export type Template = ((vars: object) => string) & { single?: CelProgram };

export type TemplateResult = { ok: true; template: Template | undefined } | { ok: false; column: number; message: string };

/** Whether a string holds an interpolation (`${`). */
export const hasInterpolation = (text: string) => text.includes('${');

/** The index of the `}` that closes an interpolation opened before `from`, skipping string literals and nested braces; -1 when there is none. */
function closing(text: string, from: number): number {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (c === '"' || c === "'") {
      const quote = text.startsWith(c.repeat(3), i) ? c.repeat(3) : c;
      let j = i + quote.length;
      while (j < text.length && !text.startsWith(quote, j)) j += text[j] === '\\' ? 2 : 1;
      i = j + quote.length - 1;
    } else if (c === '{') depth++;
    else if (c === '}') {
      if (depth === 0) return i;
      depth--;
    }
  }
  return -1;
}

/** A CEL value as the text an interpolation writes. */
export function textOf(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'bigint' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v instanceof Date) return v.toISOString().replace('.000Z', 'Z');
  if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
  if (v === null || v === undefined) return '';
  return toJson(v);
}

/** Compiles the interpolations of `text` for `phase`; `template` is undefined when it has none (the text is used as it is). */
export function compileTemplate(text: string, phase: Phase): TemplateResult {
  if (!hasInterpolation(text)) return { ok: true, template: undefined };
  const parts: (string | CelProgram)[] = [];
  let at = 0;
  while (at < text.length) {
    const open = text.indexOf('${', at);
    if (open < 0) {
      parts.push(text.slice(at));
      break;
    }
    if (open > at) parts.push(text.slice(at, open));
    const close = closing(text, open + 2);
    if (close < 0) return { ok: false, column: open + 1, message: '"${" is not closed by "}"' };
    const expr = text.slice(open + 2, close);
    if (!expr.trim()) return { ok: false, column: open + 1, message: 'an interpolation "${}" is empty' };
    const r = compileExpression(expr, phase, true);
    if (!r.ok) return { ok: false, column: open + 2 + r.column, message: r.message };
    parts.push(r.program);
    at = close + 1;
  }
  const template: Template = (vars) => {
    let out = '';
    for (const p of parts) out += typeof p === 'string' ? p : textOf(p(vars));
    return out;
  };
  if (parts.length === 1 && typeof parts[0] !== 'string') template.single = parts[0];
  return { ok: true, template };
}
