// IP policies and their allow/deny rules.
import { z } from 'zod';
import { defineKind } from './define.js';
import { cidr, description, metadata, refId, replaceable } from './fields.js';
import { withTraits } from './traits.js';

export const ipPolicy = defineKind({
  kind: 'IPPolicy',
  type: 'ip_policy',
  prefix: 'ipp',
  path: '/ip_policies',
  envelope: 'ip_policies',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'A set of allow/deny CIDR rules, applied where an edge or route refers to it.',
  events: true,
  body: { description: description(), metadata: metadata() },
});

export const ipPolicyRule = defineKind({
  kind: 'IPPolicyRule',
  type: 'ip_policy_rule',
  prefix: 'ipr',
  path: '/ip_policy_rules',
  envelope: 'ip_policy_rules',
  parent: { kind: 'IPPolicy', field: 'ip_policy_id', in: 'body', nestAs: 'rules' },
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'One CIDR of an IP policy, allowed or denied. Deleting the policy deletes its rules.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    cidr: withTraits(cidr(), { unique: { scope: 'cidr', perParent: true, what: 'CIDR' }, naturalKey: true }),
    ip_policy_id: refId(['IPPolicy'], { readAs: 'ip_policy', onDelete: 'cascade', replace: true }).describe('The policy the rule belongs to.'),
    action: replaceable(z.enum(['allow', 'deny']).describe('allow or deny.')),
  },
});
