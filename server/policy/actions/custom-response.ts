// custom-response: ends the request with the configured status, headers and body (the body
// and header values may hold `${expr}` interpolations).
import type { CustomResponseAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { expand, expandAll, type Runner } from './run.js';

export function customResponse(config: CustomResponseAction): Runner {
  const headers = Object.fromEntries(Object.entries(config.headers).map(([k, v]) => [k.toLowerCase(), v]));
  return (ctx) => {
    actionOutput(ctx.vars, 'custom_response').status_code = BigInt(config.status_code);
    return { ended: { response: { status: config.status_code, headers: expandAll(ctx, headers), body: expand(ctx, config.body) } }, did: `custom-response: ${config.status_code}` };
  };
}
