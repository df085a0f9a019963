// deny: ends the request with its status, or closes a TCP connection.
import type { DenyAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { respond, type Runner } from './run.js';

export function deny(config: DenyAction): Runner {
  return (ctx) =>
    ctx.phase === 'on_tcp_connect'
      ? { ended: 'close', did: 'deny: connection closed' }
      : { ended: respond(config.status_code, 'Forbidden\n'), did: `deny: ${config.status_code}` };
}
