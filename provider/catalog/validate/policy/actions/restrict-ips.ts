// restrict-ips: allows or denies the client by CIDR. A client in `deny` is refused; with an
// `allow` list, a client outside it is refused too. With `enforce: false` nothing is refused
// and only the variables tell what would have happened.
import { parseCidr } from '../../cidr.js';
import { onlyFields, problem } from '../config.js';
import { ALL_PHASES, defineAction } from './define.js';

export interface RestrictIpsAction { enforce: boolean; allow: string[]; deny: string[]; /** IP policies by id (ipp_...), resolved by the server that runs the policy (issue 36); absent when none. */ ip_policies?: string[] }

const IPP_ID = /^ipp_[A-Za-z0-9]{1,64}$/;

export const restrictIps = defineAction<RestrictIpsAction>({
  type: 'restrict-ips',
  phases: ALL_PHASES,
  fields: ['enforce', 'allow', 'deny', 'ip_policies'],
  check(c) {
    onlyFields(c, this.fields);
    const { enforce = true, allow = [], deny = [], ip_policies = [] } = c.config;
    let ok = true;
    if (typeof enforce !== 'boolean') ok = !!problem(c, 'enforce', 'enforce must be true or false');
    const list = (key: 'allow' | 'deny', v: unknown): string[] => {
      if (!Array.isArray(v)) return (ok = !!problem(c, key, `${key} must be a list of CIDRs such as 203.0.113.0/24`)), [];
      return v.flatMap((entry, i) => {
        const r = typeof entry === 'string' ? parseCidr(entry) : ({ ok: false, message: 'a CIDR is a string such as 203.0.113.0/24' } as const);
        if (r.ok) return [r.value];
        ok = false;
        c.issues.push({ path: `${c.path}.${key}[${i}]`, message: r.message });
        return [];
      });
    };
    const a = list('allow', allow);
    const d = list('deny', deny);
    // The service's references to IP policies: their allow and deny rules join the lists (the ingress resolves them per connection).
    const p = Array.isArray(ip_policies) && ip_policies.length <= 100 && ip_policies.every((x) => typeof x === 'string' && IPP_ID.test(x)) ? [...new Set(ip_policies as string[])] : undefined;
    if (!p) ok = !!problem(c, 'ip_policies', 'ip_policies must be a list of at most 100 IP policy ids such as ipp_...');
    if (ok && a.length + d.length + p!.length === 0) ok = !!problem(c, undefined, 'restrict-ips needs at least one CIDR in allow or deny, or an IP policy in ip_policies');
    return ok ? { enforce: enforce as boolean, allow: a, deny: d, ...(p!.length ? { ip_policies: p! } : {}) } : undefined;
  },
});
