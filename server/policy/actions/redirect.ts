// redirect: answers with a redirect; with `from`, only when the request's URL matches it.
// `to` and header values may hold `${expr}` interpolations.
import type { RedirectAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { expand, expandAll, type Runner } from './run.js';

export function redirect(config: RedirectAction): Runner {
  const headers = Object.fromEntries(Object.entries(config.headers).map(([k, v]) => [k.toLowerCase(), v]));
  return (ctx) => {
    const url = ctx.vars.req!.url$;
    let to = expand(ctx, config.to);
    if (config.from) {
      const expanded = config.from.expandFirst(url, to);
      if (expanded === null) return { did: `redirect: ${url} does not match from; continues` };
      to = expanded;
    }
    actionOutput(ctx.vars, 'redirect').url = to;
    return { ended: { response: { status: config.status_code, headers: { ...expandAll(ctx, headers), location: to }, body: '' } }, did: `redirect: ${config.status_code} to ${to}` };
  };
}
