// restrict-ips: refuses a client in `deny`, or outside `allow` when there is one (403 on
// HTTP, a closed connection on TCP); with enforce: false it only sets the variables.
import type { RestrictIpsAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput } from '../context.js';
import { matchCidr, toCidr } from '../ip.js';
import { respond, type RunContext, type Runner } from './run.js';

/**
 * What the IP policies named in `ip_policies` say of an address, from the server that runs the
 * policy (the ingress registers one per PolicyState: server/ingress/cloud-endpoints.ts). Where
 * none is registered (`edgeform policy test`), a policy naming IP policies refuses: a rule it
 * cannot read never lets a client through.
 */
export interface IpPolicyVerdict { denied?: string; allowed?: string; hasAllow: boolean }
export type IpPolicyLookup = (state: RunContext['state'], ids: readonly string[], ip: string) => IpPolicyVerdict | undefined;
let lookup: IpPolicyLookup | undefined;
export function setIpPolicyLookup(l: IpPolicyLookup | undefined): void {
  lookup = l;
}

export function restrictIps(config: RestrictIpsAction): Runner {
  const allow = config.allow.map(toCidr);
  const deny = config.deny.map(toCidr);
  const policies = config.ip_policies ?? [];
  return (ctx) => {
    const ip = ctx.vars.conn.client_ip;
    const named: IpPolicyVerdict | undefined = policies.length ? (lookup?.(ctx.state, policies, ip) ?? { denied: 'ip_policies (not resolved here)', hasAllow: false }) : undefined;
    const inDeny = matchCidr(ip, deny);
    const denied = inDeny ?? (named?.denied ? { text: named.denied } : undefined);
    const inAllow = denied ? undefined : matchCidr(ip, allow);
    const allowed = inAllow ?? (!denied && named?.allowed ? { text: named.allowed } : undefined);
    const refused = !!denied || ((allow.length > 0 || !!named?.hasAllow) && !allowed);
    const out = actionOutput(ctx.vars, 'restrict_ips');
    out.action = refused ? 'deny' : 'allow';
    out.matched_cidr = (denied ?? allowed)?.text ?? '';
    const why = denied ? `in ${denied.text}` : allowed ? `in ${allowed.text}` : allow.length || named?.hasAllow ? 'outside the allow list' : 'not in the deny list';
    if (!refused || !config.enforce) return { did: `restrict-ips: ${ip} ${why}; ${refused ? 'would be refused (enforce: false)' : 'allowed'}` };
    return { ended: ctx.phase === 'on_tcp_connect' ? 'close' : respond(403, 'Forbidden\n'), did: `restrict-ips: ${ip} ${why}; refused` };
  };
}
