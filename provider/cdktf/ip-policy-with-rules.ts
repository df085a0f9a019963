// An IP policy with its allow/deny rules as one object: a thin layer over the generated
// IpPolicy and IpPolicyRule bindings.
import { Construct } from 'constructs';
import { IpPolicy, type IpPolicyConfig } from './gen/ip-policy/index.js';
import { IpPolicyRule, type IpPolicyRuleConfig } from './gen/ip-policy-rule/index.js';

/** A rule as the rule binding takes it, less the policy it belongs to. */
export type RuleProps = Omit<IpPolicyRuleConfig, 'ipPolicyId'>;

export interface IpPolicyWithRulesProps extends IpPolicyConfig {
  /** Networks allowed (shorthand for rules with action `allow`). Default: none. */
  readonly allow?: string[];
  /** Networks denied (shorthand for rules with action `deny`). Default: none. */
  readonly deny?: string[];
  /** Rules with their own description or metadata. Default: none. */
  readonly rules?: RuleProps[];
}

export class IpPolicyWithRules extends Construct {
  readonly policy: IpPolicy;
  readonly rules: IpPolicyRule[] = [];

  constructor(scope: Construct, id: string, props: IpPolicyWithRulesProps) {
    super(scope, id);
    const { allow = [], deny = [], rules = [], ...policy } = props;
    this.policy = new IpPolicy(this, 'policy', policy);
    const all: RuleProps[] = [...allow.map((cidr) => ({ cidr, action: 'allow' })), ...deny.map((cidr) => ({ cidr, action: 'deny' })), ...rules];
    for (const rule of all) {
      // A CIDR is unique within its policy, so it names the rule: reordering changes nothing.
      this.rules.push(new IpPolicyRule(this, `rule-${rule.cidr.replace(/[^A-Za-z0-9]+/g, '_')}`, { ...rule, ipPolicyId: this.policy.id }));
    }
  }

  /** The policy's id (a token until apply). */
  get id(): string {
    return this.policy.id;
  }
}
