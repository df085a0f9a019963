// remove-headers: removes headers from the request (upstream) or the response (client).
import type { RemoveHeadersAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { headersOf, type Runner } from './run.js';

export function removeHeaders(config: RemoveHeadersAction): Runner {
  return (ctx) => {
    const { lists, changes } = headersOf(ctx);
    for (const name of config.headers) {
      delete lists[name];
      delete changes.set_headers[name];
      if (!changes.remove_headers.includes(name)) changes.remove_headers.push(name);
    }
    actionOutput(ctx.vars, 'remove_headers').headers_removed = [...config.headers];
    return { did: `remove-headers: ${config.headers.join(', ')}` };
  };
}
