// evaluate: one phase of a compiled policy against one request or connection. Plain data in,
// plain data out, no I/O: the rules run in order; a rule whose expressions are all true runs
// its actions in order; an action that ends the request ends the phase (later rules do not run).
import type { Phase } from '../../provider/catalog/validate/traffic-policy.js';
import { lookups, macroBudget, matchBudget, MAX_MACRO_STEPS, MAX_MATCHES_COST, overMacroBudget, overMatchBudget } from '../../provider/catalog/validate/policy/cel.js';
import type { ActionRun, Ended, Mutations } from './actions/run.js';
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
  /** set-vars' variables after this phase, for the next phase of the same request. */
  vars: Record<string, unknown>;
  /** Set when an action had to wait: the phase's final result (await it). */
  pending?: Promise<PolicyResult>;
}

/** The variables of the evaluation under way, which getReqHeader and getResHeader read (evaluation is synchronous). */
let current: CelVariables | undefined;
lookups.reqHeader = (name) => (current?.req ? headerOf(current.req, name) : undefined);
lookups.resHeader = (name) => current?.res?.headers[name];
lookups.query = (name) => current?.req?.query[name];
lookups.reqCookie = (name) => (current?.req?.cookies as Record<string, Record<string, unknown>[]> | undefined)?.[name]?.[0];
lookups.resCookie = (name) => (current?.res?.cookies as Record<string, Record<string, unknown>[]> | undefined)?.[name]?.[0];

/** Where a phase stopped to wait for an action, and what it had so far. */
interface Resume { vars: CelVariables; now: number; mutations: Mutations; rules: RuleTrace[]; rule: number; action: number; host?: unknown }

/**
 * Runs one phase. Synchronous unless an action must wait (an http-request, a JWKS fetch):
 * then `pending` holds the phase's final result, and the caller awaits it.
 */
export function evaluate(policy: CompiledPolicy, phase: Phase, input: PolicyInput, state: PolicyState, host?: unknown): PolicyResult {
  const now = input.now ?? Date.now();
  const vars = celVariables(input, now);
  const mutations: Mutations = { request: { set_headers: {}, remove_headers: [] }, response: { set_headers: {}, remove_headers: [] } };
  return run(policy, phase, state, { vars, now, mutations, rules: [], rule: 0, action: 0, host });
}

function run(policy: CompiledPolicy, phase: Phase, state: PolicyState, at: Resume): PolicyResult {
  const { vars, now, mutations, rules } = at;
  current = vars;
  macroBudget.left = MAX_MACRO_STEPS;
  matchBudget.left = MAX_MATCHES_COST;
  matchBudget.refused = 0;
  let outcome: PolicyResult['outcome'] = 'continue';
  const all = policy.phases[phase] ?? [];
  try {
    for (let i = at.rule; i < all.length; i++) {
      const rule = all[i];
      let trace: RuleTrace;
      let from = 0;
      if (i === at.rule && at.action > 0) {
        // Resuming inside this rule: its expressions matched, its earlier actions ran.
        trace = rules[rules.length - 1];
        from = at.action;
      } else {
        trace = rule.name !== undefined ? { index: rule.index, name: rule.name, matched: true, actions: [] } : { index: rule.index, matched: true, actions: [] };
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
      }
      for (let j = from; j < rule.actions.length; j++) {
        const action = rule.actions[j];
        let r: ActionRun;
        try {
          r = action.run({ phase, vars, state, now, mutations, templates: action.templates, host: at.host });
        } catch (err) {
          // An interpolation or a configuration that fails on this request: the action does
          // nothing and says why; the rule's later actions and later rules still run.
          r = { did: `${action.type}: failed: ${(err as Error).message.split('\n')[0]}` };
        }
        if (r.pending) {
          const waiting = r.pending;
          const resume: Resume = { ...at, rule: i, action: j + 1 };
          const result: PolicyResult = { outcome: 'continue', mutations, actions: vars.actions, vars: vars.vars, rules };
          result.pending = waiting.then(
            (done) => settle(policy, phase, state, resume, action.type, done),
            (err) => settle(policy, phase, state, resume, action.type, { did: `${action.type}: failed: ${(err as Error).message}` }),
          );
          return result;
        }
        trace.actions.push({ type: action.type, did: r.did });
        if (r.ended) {
          outcome = r.ended;
          break;
        }
      }
      if (outcome !== 'continue') break;
    }
  } finally {
    current = undefined;
    macroBudget.left = Infinity;
    matchBudget.left = Infinity;
  }
  return { outcome, mutations, actions: vars.actions, vars: vars.vars, rules };
}

/** Records what a waiting action did and runs the rest of the phase. */
function settle(policy: CompiledPolicy, phase: Phase, state: PolicyState, at: Resume, type: string, done: ActionRun): PolicyResult | Promise<PolicyResult> {
  at.rules[at.rules.length - 1].actions.push({ type, did: done.did });
  if (done.ended) return { outcome: done.ended, mutations: at.mutations, actions: at.vars.actions, vars: at.vars.vars, rules: at.rules };
  const r = run(policy, phase, state, at);
  return r.pending ?? r;
}
