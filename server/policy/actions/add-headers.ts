// add-headers: sets headers on the request (upstream) or the response (client); later
// expressions see them, and actions.service.add_headers.headers_added lists them.
import type { AddHeadersAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { headersOf, type Runner } from './run.js';

export function addHeaders(config: AddHeadersAction): Runner {
  const entries = Object.entries(config.headers).map(([k, v]) => [k.toLowerCase(), v] as const);
  return (ctx) => {
    const { lists, changes } = headersOf(ctx);
    for (const [name, value] of entries) {
      lists[name] = [value];
      changes.set_headers[name] = value;
      changes.remove_headers = changes.remove_headers.filter((h) => h !== name);
    }
    actionOutput(ctx.vars, 'add_headers').headers_added = Object.fromEntries(entries);
    return { did: `add-headers: ${entries.map(([k, v]) => `${k}: ${v}`).join(', ')}` };
  };
}
