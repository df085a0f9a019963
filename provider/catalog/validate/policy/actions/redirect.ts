// redirect: answers with a redirect to `to`; with `from` (RE2), only when the request's URL
// matches it, `to` then taking its groups as $1 or $<name>.
import { Re2Pattern, regexProblem } from '../../regex.js';
import { headerMap, onlyFields, problem, statusCode, text } from '../config.js';
import { defineAction, HTTP_PHASES } from './define.js';

export interface RedirectAction { from?: Re2Pattern; to: string; status_code: number; headers: Record<string, string> }

/** A `from` pattern (RE2), compiled; shared with url-rewrite. */
export function fromPattern(c: Parameters<typeof onlyFields>[0], required: boolean): Re2Pattern | undefined | null {
  const from = text(c, 'from', { required, max: 1024 });
  if (from === undefined) return c.config.from === undefined && !required ? null : undefined;
  let why = regexProblem(from);
  if (!why) {
    try {
      return new Re2Pattern(from);
    } catch (e) {
      why = (e as Error).message;
    }
  }
  return problem(c, 'from', `from is not a valid RE2 pattern: ${why}`);
}

export const redirect = defineAction<RedirectAction>({
  type: 'redirect',
  phases: HTTP_PHASES,
  fields: ['from', 'to', 'status_code', 'headers'],
  check(c) {
    onlyFields(c, this.fields);
    const from = fromPattern(c, false);
    const to = text(c, 'to', { required: true, max: 2048 });
    const status = statusCode(c, 'status_code', [301, 302, 303, 307, 308], 302);
    const headers = headerMap(c, 'headers', false);
    if (from === undefined || to === undefined || status === undefined || headers === undefined) return undefined;
    return { ...(from ? { from } : {}), to, status_code: status, headers };
  },
});
