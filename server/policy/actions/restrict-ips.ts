// restrict-ips: refuses a client in `deny`, or outside `allow` when there is one (403 on
// HTTP, a closed connection on TCP); with enforce: false it only sets the variables.
import type { RestrictIpsAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { matchCidr, toCidr } from '../ip.js';
import { respond, type Runner } from './run.js';

export function restrictIps(config: RestrictIpsAction): Runner {
  const allow = config.allow.map(toCidr);
  const deny = config.deny.map(toCidr);
  return (ctx) => {
    const ip = ctx.vars.conn.client_ip;
    const denied = matchCidr(ip, deny);
    const allowed = denied ? undefined : matchCidr(ip, allow);
    const refused = !!denied || (allow.length > 0 && !allowed);
    const out = actionOutput(ctx.vars, 'restrict_ips');
    out.action = refused ? 'deny' : 'allow';
    out.matched_cidr = (denied ?? allowed)?.text ?? '';
    const why = denied ? `in ${denied.text}` : allowed ? `in ${allowed.text}` : allow.length ? 'outside the allow list' : 'not in the deny list';
    if (!refused || !config.enforce) return { did: `restrict-ips: ${ip} ${why}; ${refused ? 'would be refused (enforce: false)' : 'allowed'}` };
    return { ended: ctx.phase === 'on_tcp_connect' ? 'close' : respond(403, 'Forbidden\n'), did: `restrict-ips: ${ip} ${why}; refused` };
  };
}
