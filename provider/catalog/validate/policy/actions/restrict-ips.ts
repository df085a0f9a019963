// restrict-ips: allows or denies the client by CIDR. A client in `deny` is refused; with an
// `allow` list, a client outside it is refused too. With `enforce: false` nothing is refused
// and only the variables tell what would have happened.
import { parseCidr } from '../../cidr.js';
import { onlyFields, problem } from '../config.js';
import { ALL_PHASES, defineAction } from './define.js';

export interface RestrictIpsAction { enforce: boolean; allow: string[]; deny: string[] }

export const restrictIps = defineAction<RestrictIpsAction>({
  type: 'restrict-ips',
  phases: ALL_PHASES,
  fields: ['enforce', 'allow', 'deny'],
  check(c) {
    if (c.config.ip_policies !== undefined) {
      problem(c, 'ip_policies', "ip_policies (references to IP policies) are not resolved by edgeform's policy engine yet; list the CIDRs in allow and deny, or use the route's ip_restriction module, which takes edgeform's IP policies");
      return undefined;
    }
    onlyFields(c, this.fields);
    const { enforce = true, allow = [], deny = [] } = c.config;
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
    if (ok && a.length + d.length === 0) ok = !!problem(c, undefined, 'restrict-ips needs at least one CIDR in allow or deny');
    return ok ? { enforce: enforce as boolean, allow: a, deny: d } : undefined;
  },
});
