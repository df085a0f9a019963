// ip_restriction: the client address against every rule of every listed IP policy. Deny beats
// allow; with any allow rule, an address no allow rule covers is refused; a deleted policy is
// absent from the table and so counts as zero rules (SPEC). TCP and TLS edges ask the same
// question through ipAllowed.
import { isIP } from 'node:net';
import { matchCidr, toCidr, type Cidr } from '../../policy/ip.js';
import type { FilterFactory, IngressTable } from '../types.js';
import { errorAnswer } from '../http/error-page.js';

/** The parsed rules, and the verdicts given so far by client address (a client sends many requests). */
interface Rules { allow: Cidr[]; deny: Cidr[]; verdicts: Map<string, boolean> }

/** Verdicts kept per rule set and table version, at most this many (then they start over). */
const MAX_VERDICTS = 4096;

/** Rules of the listed policies, parsed once per table version (the table is immutable). */
const compiled = new WeakMap<IngressTable, Map<string, Rules>>();

function rulesOf(table: IngressTable, policyIds: readonly string[]): Rules {
  let byKey = compiled.get(table);
  if (!byKey) compiled.set(table, (byKey = new Map()));
  const key = policyIds.join(',');
  let rules = byKey.get(key);
  if (!rules) {
    rules = { allow: [], deny: [], verdicts: new Map() };
    for (const id of policyIds) {
      for (const r of table.ipPolicies.get(id) ?? []) rules[r.action].push(...cidrForms(r.cidr));
    }
    byKey.set(key, rules);
  }
  return rules;
}

/**
 * A rule written as an IPv4-mapped IPv6 network (::ffff:10.0.0.0/104) also covers the IPv4
 * addresses it maps, since a dual-stack listener reports the same client either way.
 */
function cidrForms(text: string): Cidr[] {
  const cidr = toCidr(text);
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)\/(\d+)$/i.exec(text);
  if (!mapped || Number(mapped[2]) < 96) return [cidr];
  return [cidr, toCidr(`${mapped[1]}/${Number(mapped[2]) - 96}`)];
}

/** Whether `ip` may pass the listed policies (an address that is not an IP never may, once any rule exists). */
export function ipAllowed(table: IngressTable, policyIds: readonly string[], ip: string): boolean {
  const rules = rulesOf(table, policyIds);
  if (rules.allow.length === 0 && rules.deny.length === 0) return true;
  let verdict = rules.verdicts.get(ip);
  if (verdict === undefined) {
    verdict = judge(rules, ip);
    if (rules.verdicts.size >= MAX_VERDICTS) rules.verdicts.clear();
    rules.verdicts.set(ip, verdict);
  }
  return verdict;
}

function judge({ allow, deny }: Rules, ip: string): boolean {
  const addr = ip.replace(/%.*$/, ''); // a link-local zone names the interface, not the client
  if (matchCidr(addr, deny)) return false;
  if (allow.length > 0) return matchCidr(addr, allow) !== undefined;
  // Only deny rules: an address we cannot read is refused rather than waved through.
  return isIP(addr) !== 0;
}

export const ipRestriction: FilterFactory = (config) => {
  // The full input form names them ip_policy_ids; the read form, ip_policies [{id}].
  const policyIds: string[] = config?.ip_policy_ids ?? (config?.ip_policies ?? []).map((p: { id: string }) => p.id);
  return {
    async handle(ex, next) {
      if (!ipAllowed(ex.table, policyIds, ex.clientIp)) {
        ex.answer(errorAnswer('ERR_SERVICE_780', `The client address ${ex.clientIp} is not allowed by this route's IP restriction.`));
        return;
      }
      await next();
    },
  };
};
