// evaluate: one phase of a compiled policy against one request or connection. Plain data in,
// plain data out, no I/O: the rules run in order; a rule whose expressions are all true runs
// its actions in order; an action that ends the request ends the phase (later rules do not run).
import type { Phase } from '../../provider/catalog/validate/traffic-policy.js';
import { lookups, macroBudget, matchBudget, MAX_MACRO_STEPS, MAX_MATCHES_COST, overMacroBudget, overMatchBudget } from '../../provider/catalog/validate/policy/cel.js';
import type { Ended, Mutations } from './actions/run.js';
import type { CompiledPolicy } from './compile.js';
import { celVariables, headerOf, type ActionVariables, type CelVariables, type PolicyInput } from './context.js';
import type { PolicyState } from './state.js';

export interface RuleTrace {
  index: number;
  name?: string;
  matched: boolean;
  /** Why an expression could not be evaluated (it then counts as false). */
  error?: string;
  actions: { type: string; did: string }[];
}

export interface PolicyResult {
  /** `continue`: forward upstream (or accept the connection) with `mutations` applied. */
  outcome: 'continue' | Ended;
  mutations: Mutations;
  /** The action variables after this phase, for the next phase of the same request (to read or pass on: groups no action wrote are shared and frozen). */
  actions: ActionVariables;
  rules: RuleTrace[];
}

/** The variables of the evaluation under way, which getReqHeader and getResHeader read (evaluation is synchronous). */
let current: CelVariables | undefined;
lookups.reqHeader = (name) => (current?.req ? headerOf(current.req, name) : undefined);
lookups.resHeader = (name) => current?.res?.headers[name];
lookups.query = (name) => current?.req?.query[name];
lookups.reqCookie = (name) => (current?.req?.cookies as Record<string, Record<string, unknown>[]> | undefined)?.[name]?.[0];
lookups.resCookie = (name) => (current?.res?.cookies as Record<string, Record<string, unknown>[]> | undefined)?.[name]?.[0];

export function evaluate(policy: CompiledPolicy, phase: Phase, input: PolicyInput, state: PolicyState): PolicyResult {
  const now = input.now ?? Date.now();
  const vars = celVariables(input, now);
  current = vars;
  macroBudget.left = MAX_MACRO_STEPS;
  matchBudget.left = MAX_MATCHES_COST;
  matchBudget.refused = 0;
  const mutations: Mutations = { request: { set_headers: {}, remove_headers: [] }, response: { set_headers: {}, remove_headers: [] } };
  const rules: RuleTrace[] = [];
  let outcome: PolicyResult['outcome'] = 'continue';
  for (const rule of policy.phases[phase] ?? []) {
    const trace: RuleTrace = rule.name !== undefined ? { index: rule.index, name: rule.name, matched: true, actions: [] } : { index: rule.index, matched: true, actions: [] };
    rules.push(trace);
    for (const e of rule.expressions) {
      let value: unknown;
      const budget = macroBudget.left;
      const matchRefused = matchBudget.refused;
      try {
        value = e.program(vars);
        // Over the macro budget is an error even where CEL would let another element decide (`exists` true elsewhere).
        if (macroBudget.left < 0 && budget >= 0) throw overMacroBudget();
        // A matches() refused for the budget is an error even where CEL would let another operand decide (`|| true`).
        if (matchBudget.refused > matchRefused) throw overMatchBudget();
      } catch (err) {
        trace.error = `${e.text}: ${(err as Error).message.split('\n')[0]}`;
        value = false;
      }
      if (value !== true) {
        trace.matched = false;
        break;
      }
    }
    if (!trace.matched) continue;
    for (const action of rule.actions) {
      const r = action.run({ phase, vars, state, now, mutations });
      trace.actions.push({ type: action.type, did: r.did });
      if (r.ended) {
        outcome = r.ended;
        break;
      }
    }
    if (outcome !== 'continue') break;
  }
  current = undefined;
  macroBudget.left = Infinity;
  matchBudget.left = Infinity;
  return { outcome, mutations, actions: vars.actions, rules };
}
