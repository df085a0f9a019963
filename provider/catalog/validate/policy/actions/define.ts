// The shape of an action's definition: where it may run, its fields, and the check that
// turns a config into the typed form the engine runs.
import type { Phase } from '../../traffic-policy.js';
import type { ConfigContext } from '../config.js';

export const HTTP_PHASES = ['on_http_request', 'on_http_response'] as const satisfies readonly Phase[];
export const ALL_PHASES = ['on_http_request', 'on_http_response', 'on_tcp_connect'] as const satisfies readonly Phase[];

export interface ActionDef<T> {
  type: string;
  phases: readonly Phase[];
  fields: readonly string[];
  /** Top-level fields that hold CEL expressions themselves (not `${}` templates). */
  expressionFields?: readonly string[];
  /** No field holds `${}` interpolations: the config is taken literally (a route module's settings). */
  literal?: boolean;
  /** The typed config, or undefined after adding problems to `c.issues`. */
  check(c: ConfigContext, phase: Phase): T | undefined;
}

export const defineAction = <T>(def: ActionDef<T>) => def;
