// deny: ends the request with its status, or closes a TCP connection.
import type { DenyAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { respond, type Runner } from './run.js';

export function deny(config: DenyAction): Runner {
  return (ctx) => {
    if (ctx.phase === 'on_tcp_connect') return { ended: 'close', did: 'deny: connection closed' };
    actionOutput(ctx.vars, 'deny').status_code = BigInt(config.status_code);
    return { ended: respond(config.status_code, 'Forbidden\n'), did: `deny: ${config.status_code}` };
  };
}
