// The registry of route-module filters: module name -> factory. The order they run in is
// MODULE_ORDER (order.ts), never this file's; a module configured on a route with no entry
// here makes the route answer 502 (refusing beats skipping a restriction).
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
