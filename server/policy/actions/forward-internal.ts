// forward-internal: ends the request here, naming the internal endpoint that answers it
// (`forward_internal`); the ingress forwards (server/ingress/cloud-endpoints.ts). Where
// nothing forwards (`edgeform policy test`), the response stands: a 502 saying so.
import type { ForwardInternalAction } from '../../../provider/catalog/validate/policy/actions/forward-internal.js';
import type { Runner } from './run.js';

export function forwardInternal(config: ForwardInternalAction): Runner {
  const body = `forward-internal: the request goes to ${config.url}\n`;
  return () => ({
    ended: { response: { status: 502, headers: { 'content-type': 'text/plain; charset=utf-8' }, body, forward_internal: config.url } },
    did: `forward-internal: to ${config.url}`,
  });
}
