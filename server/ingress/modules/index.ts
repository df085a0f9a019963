// The route modules by name (MODULE_ORDER in order.ts says when each runs).
import type { FilterFactory } from '../types.js';
import type { ModuleName } from './order.js';
import { ipRestriction } from './ip-restriction.js';
import { signInNotYet } from './sign-in.js';
import { userAgentFilter } from './user-agent-filter.js';
import { webhookVerification } from './webhook-verification.js';

export const FILTERS: Partial<Record<ModuleName, FilterFactory>> = {
  ip_restriction: ipRestriction,
  user_agent_filter: userAgentFilter,
  webhook_verification: webhookVerification,
  oauth: signInNotYet('oauth'),
  oidc: signInNotYet('oidc'),
  saml: signInNotYet('saml'),
};
