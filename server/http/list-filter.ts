// The service's `filter` on lists: a CEL expression over each item's read form, named `obj`
// (`obj.type == "cloud"`, `obj.url.startsWith("https://")`). Compiled once per request with
// the same limits as policy expressions; an item whose expression fails to evaluate (a
// field it lacks) is left out, as a false would be.
import { Environment } from '@marcbachmann/cel-js';
import { ApiError } from './errors.js';

/** Longest filter accepted, in characters. */
export const MAX_FILTER_LENGTH = 4096;

let env: Environment | undefined;
const envOf = () => {
  if (!env) {
    env = new Environment({ homogeneousAggregateLiterals: false, limits: { maxAstNodes: 2000, maxDepth: 50 } });
    env.registerVariable('obj', 'map');
  }
  return env;
};

export type ItemFilter = (item: Record<string, unknown>) => boolean;

/** The filter of a list query, or undefined when none is given; 400 naming the column of a bad one. */
export function filterOf(query: Record<string, string | string[] | undefined>): ItemFilter | undefined {
  const text = query.filter;
  if (text === undefined) return undefined;
  const bad = (reason: string) => new ApiError('ERR_SERVICE_104', `filter: ${reason}`, { field: 'filter', reason });
  if (typeof text !== 'string') throw bad('give one filter');
  if (text.length > MAX_FILTER_LENGTH) throw bad(`must be at most ${MAX_FILTER_LENGTH} characters`);
  let program: ((vars: object) => unknown) & { check?: () => { valid: boolean; type?: string; error?: Error } };
  try {
    program = envOf().parse(text) as never;
    const checked = program.check!();
    if (!checked.valid) throw checked.error ?? new Error('does not type-check');
    if (checked.type !== 'bool' && checked.type !== 'dyn') throw new Error(`a filter must give a bool; this one gives ${checked.type}`);
  } catch (e) {
    const at = (e as { range?: { start: number } }).range?.start;
    throw bad(`${at !== undefined ? `column ${at + 1}: ` : ''}${(e as Error).message.split('\n')[0]} (a CEL expression over obj, e.g. obj.type == "cloud")`);
  }
  return (item) => {
    try {
      return program({ obj: item }) === true;
    } catch {
      return false;
    }
  };
}
