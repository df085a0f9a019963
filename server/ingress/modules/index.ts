// The registry of route-module filters: module name -> factory. The order they run in is
// MODULE_ORDER (order.ts), never this file's; a module configured on a route with no entry
// here makes the route answer 502 (refusing beats skipping a restriction).
import type { FilterFactory } from '../types.js';
import { circuitBreaker } from './circuit-breaker.js';
import { compression } from './compression.js';
import type { ModuleName } from './order.js';
import { requestHeaders } from './request-headers.js';
import { responseHeaders } from './response-headers.js';
import { trafficPolicy } from './traffic-policy.js';
import { websocketTcpConverter } from './websocket-tcp-converter.js';

export const FILTERS: Partial<Record<ModuleName, FilterFactory>> = {
  traffic_policy: trafficPolicy,
  circuit_breaker: circuitBreaker,
  request_headers: requestHeaders,
  response_headers: responseHeaders,
  compression,
  websocket_tcp_converter: websocketTcpConverter,
};
