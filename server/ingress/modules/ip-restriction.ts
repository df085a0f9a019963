// ip_restriction: the client address against every rule of every listed IP policy. Deny beats
// allow; with any allow rule, an address no allow rule covers is refused; a deleted policy is
// absent from the table and so counts as zero rules (SPEC). TCP and TLS edges ask the same
// question through ipAllowed. An agent's endpoint (gateway/v2/bind.ts) gives its rules inline
// (allow_cidrs, deny_cidrs, as the SDK's allowCidr/denyCidr), with the same semantics: they are
// one more set of rules beside the listed policies'.
import { addressKey, IpRuleSet } from '../ip-rules.js';
import type { FilterFactory, IngressTable } from '../types.js';
import { errorAnswer } from '../http/error-page.js';

/**
 * Whether `ip` may pass the listed policies (an address that is not an IP never may, once any
 * rule exists). Each policy's rules are compact sorted ranges (ip-rules.ts): a lookup is a
 * binary search per policy, with nothing compiled per table version, so a change to one rule
 * of a million is live at once.
 */
export function ipAllowed(table: IngressTable, policyIds: readonly string[], ip: string, inline?: IpRuleSet): boolean {
  let any = !!inline && inline.size > 0;
  let allowRules = any && inline!.hasAllow;
  for (const id of policyIds) {
    const set = table.ipPolicies.get(id);
    if (!set || set.size === 0) continue;
    any = true;
    if (set.hasAllow) allowRules = true;
  }
  if (!any) return true;
  const key = addressKey(ip);
  // Only deny rules: an address we cannot read is refused rather than waved through.
  if (!key) return false;
  if (inline?.holds(key, 'deny')) return false;
  for (const id of policyIds) if (table.ipPolicies.get(id)?.holds(key, 'deny')) return false;
  if (!allowRules) return true;
  if (inline?.holds(key, 'allow')) return true;
  for (const id of policyIds) if (table.ipPolicies.get(id)?.holds(key, 'allow')) return true;
  return false;
}

/** An agent endpoint's inline rules (allow_cidrs, deny_cidrs: canonical CIDRs, bind.ts checked them), or undefined when it has none. */
export function inlineRules(config: { allow_cidrs?: string[]; deny_cidrs?: string[] } | undefined): IpRuleSet | undefined {
  const allow = config?.allow_cidrs ?? [];
  const deny = config?.deny_cidrs ?? [];
  if (!allow.length && !deny.length) return undefined;
  return IpRuleSet.of([
    ...allow.map((cidr, i) => ({ id: `allow:${i}`, cidr, action: 'allow' as const })),
    ...deny.map((cidr, i) => ({ id: `deny:${i}`, cidr, action: 'deny' as const })),
  ]);
}

export const ipRestriction: FilterFactory = (config) => {
  // The full input form names them ip_policy_ids; the read form, ip_policies [{id}].
  const policyIds: string[] = config?.ip_policy_ids ?? (config?.ip_policies ?? []).map((p: { id: string }) => p.id);
  const inline = inlineRules(config);
  return {
    async handle(ex, next) {
      if (!ipAllowed(ex.table, policyIds, ex.clientIp, inline)) {
        ex.answer(errorAnswer('ERR_SERVICE_780', `The client address ${ex.clientIp} is not allowed by this route's IP restriction.`));
        return;
      }
      await next();
    },
  };
};
