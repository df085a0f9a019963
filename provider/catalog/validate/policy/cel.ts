// CEL for traffic-policy expressions: one environment per phase, declaring exactly the
// variables of that phase (variables.ts), so an expression is type-checked when the policy
// is compiled and an unknown variable, a misspelt field or `req.method == 1` is a problem
// with its column, not a surprise per request.
import { Environment } from '@marcbachmann/cel-js';
import type { Phase } from '../traffic-policy.js';
import { variablesOf } from './variables.js';

/**
 * The headers the macros `getReqHeader('Name')` and `getResHeader('Name')` read. A CEL
 * function sees only its arguments, and evaluation is synchronous, so the engine points
 * these at the message being evaluated just before it runs a phase's expressions.
 */
export const macroHeaders: { req: Record<string, string[]>; res: Record<string, string[]> } = { req: {}, res: {} };

const NONE: string[] = [];

/** The CEL environment of a phase (the conformance tests run expressions in it too). */
export function celEnvironment(phase: Phase): Environment {
  const env = new Environment({ homogeneousAggregateLiterals: false, limits: { maxAstNodes: 2000, maxDepth: 50 } });
  for (const [name, schema] of Object.entries(variablesOf(phase))) env.registerVariable({ name, schema } as never);
  if (phase !== 'on_tcp_connect') {
    env.registerFunction('getReqHeader(string): list<string>', (name: string) => macroHeaders.req[name.toLowerCase()] ?? NONE);
  }
  if (phase === 'on_http_response') {
    env.registerFunction('getResHeader(string): list<string>', (name: string) => macroHeaders.res[name.toLowerCase()] ?? NONE);
  }
  return env;
}

const environments = new Map<Phase, Environment>();
const envOf = (phase: Phase) => environments.get(phase) ?? environments.set(phase, celEnvironment(phase)).get(phase)!;

/** A compiled expression: call it with the phase's variables; it returns the value or throws. */
export type CelProgram = (vars: Record<string, unknown>) => unknown;

export type ExpressionResult = { ok: true; program: CelProgram } | { ok: false; column: number; message: string };

/** The dotted name that ends where the checker stopped (`req.headrs`), to name it whole. */
function nameEndingAt(text: string, end: number): string {
  let start = end;
  while (start > 0 && /[A-Za-z0-9_.]/.test(text[start - 1])) start--;
  return text.slice(start, end);
}

function explain(text: string, error: Error & { range?: { start: number; end: number } }, phase: Phase): { column: number; message: string } {
  const start = error.range?.start ?? 0;
  let message = error.message.split('\n')[0];
  const unknown = /^(?:No such key|Unknown variable): /.exec(message);
  if (unknown) message = `unknown variable ${nameEndingAt(text, error.range?.end ?? start)} in ${phase} (see docs/traffic-policy.md for the variables)`;
  return { column: start + 1, message };
}

/** Parses and type-checks one expression for a phase; it must give a bool. */
export function compileExpression(text: string, phase: Phase): ExpressionResult {
  const env = envOf(phase);
  let parsed: ReturnType<Environment['parse']>;
  try {
    parsed = env.parse(text);
  } catch (e) {
    return { ok: false, ...explain(text, e as Error, phase) };
  }
  const checked = parsed.check();
  if (!checked.valid) return { ok: false, ...explain(text, checked.error as Error, phase) };
  if (checked.type !== 'bool' && checked.type !== 'dyn') return { ok: false, column: 1, message: `an expression must give a bool; this one gives ${checked.type}` };
  return { ok: true, program: parsed as unknown as CelProgram };
}
