// The registry of route-module filters: module name -> factory. The order they run in is
// MODULE_ORDER (order.ts), never this file's; a module configured on a route with no entry
// here makes the route answer 502 (refusing beats skipping a restriction).
import type { FilterFactory } from '../types.js';
import { basicAuth } from './basic-auth.js';
import { circuitBreaker } from './circuit-breaker.js';
import { compression } from './compression.js';
import { ipRestriction } from './ip-restriction.js';
import type { ModuleName } from './order.js';
import { requestHeaders } from './request-headers.js';
import { responseHeaders } from './response-headers.js';
import { oauth } from './oauth.js';
import { oidc } from './oidc.js';
import { saml } from './saml.js';
import { trafficPolicy } from './traffic-policy.js';
import { userAgentFilter } from './user-agent-filter.js';
import { webhookVerification } from './webhook-verification.js';
import { websocketTcpConverter } from './websocket-tcp-converter.js';

export const FILTERS: Partial<Record<ModuleName, FilterFactory>> = {
  ip_restriction: ipRestriction,
  user_agent_filter: userAgentFilter,
  traffic_policy: trafficPolicy,
  basic_auth: basicAuth,
  oauth,
  oidc,
  saml,
  webhook_verification: webhookVerification,
  circuit_breaker: circuitBreaker,
  request_headers: requestHeaders,
  response_headers: responseHeaders,
  compression,
  websocket_tcp_converter: websocketTcpConverter,
};
