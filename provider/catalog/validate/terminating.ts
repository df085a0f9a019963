// A cloud endpoint has no upstream of its own: its policy must end every request (or
// connection) itself, as the service requires ("All Cloud Endpoint Traffic Policies must end
// with a terminating action"). Checked on the parsed document, after the policy is valid.
import type { Phase, TrafficPolicy } from './traffic-policy.js';

/**
 * Actions that always end what they run on. rate-limit ends only what is over its limit, so
 * it is not one; redirect is one unless it has `from` (it then ends only the URLs that match);
 * forward-internal is one unless its on_error is `continue`.
 */
export const TERMINATING_ACTIONS = ['deny', 'custom-response', 'redirect', 'forward-internal', 'close-connection'] as const;

const ends = (a: { type: string; config?: Record<string, unknown> }) =>
  (TERMINATING_ACTIONS as readonly string[]).includes(a.type)
  && !(a.type === 'redirect' && a.config?.from !== undefined)
  && !(a.type === 'forward-internal' && a.config?.on_error === 'continue');

/**
 * Where a request can fall through `phase` without a terminating action: undefined when some
 * rule without expressions ends it. Otherwise the path and name of the last rule (the one a
 * request that matched nothing else leaves), and why.
 */
export function fallThrough(policy: TrafficPolicy, phase: Phase): { path: string; message: string } | undefined {
  const rules = policy[phase] ?? [];
  const ending = rules.findIndex((r) => r.expressions.length === 0 && r.actions.some(ends));
  if (ending >= 0) return undefined;
  const list = TERMINATING_ACTIONS.join(', ');
  if (!rules.length) return { path: phase, message: `${phase} has no rule, so every request would fall through; a cloud endpoint's policy must end each one with a terminating action (${list})` };
  const last = rules.length - 1;
  const rule = rules[last];
  const named = `${phase}[${last}]${rule.name ? ` (${rule.name})` : ''}`;
  const why = rule.expressions.length ? 'has expressions, so what it does not match' : 'has no terminating action, so what it lets through';
  return {
    path: `${phase}[${last}]`,
    message: `${named} can fall through: it ${why} reaches the end of the policy unanswered; end the policy with a rule without expressions whose actions include a terminating action (${list})`,
  };
}
