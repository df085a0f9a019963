// add-headers: sets headers on the request (upstream) or the response (client); later
// expressions see them, and actions.service.add_headers.headers_added lists them. Values may
// hold `${expr}` interpolations.
import type { AddHeadersAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { expand, headersOf, type Runner } from './run.js';

export function addHeaders(config: AddHeadersAction): Runner {
  const entries = Object.entries(config.headers).map(([k, v]) => [k.toLowerCase(), v] as const);
  return (ctx) => {
    const { lists, changes } = headersOf(ctx);
    const added: Record<string, string> = {};
    for (const [name, template] of entries) {
      const value = expand(ctx, template);
      added[name] = value;
      lists[name] = [value];
      changes.set_headers[name] = value;
      changes.remove_headers = changes.remove_headers.filter((h) => h !== name);
    }
    actionOutput(ctx.vars, 'add_headers').headers_added = added;
    return { did: `add-headers: ${Object.entries(added).map(([k, v]) => `${k}: ${v}`).join(', ')}` };
  };
}
