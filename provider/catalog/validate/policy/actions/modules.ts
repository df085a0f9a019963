// A route's modules as actions: the chain the ingress runs for an HTTPS route (and a TCP or
// TLS edge) is one policy, each enabled module a rule of one `module-*` action at its place in
// MODULE_ORDER and the route's traffic_policy's own rules spliced in at theirs
// (server/policy/route.ts builds it; `edgeform policy show` prints it). The config is the
// module's, as the route stores it (the catalog checked it there): literal, with no `${}`
// interpolation, so a header value that holds `${` means what it meant in the module. Their
// runners are in server/policy/actions/modules.ts; at the ingress each runs the module's own code.
import type { Phase } from '../../traffic-policy.js';
import { problem } from '../config.js';
import { defineAction } from './define.js';

/** Module name (as a route spells it) -> its action type. */
export const MODULE_ACTIONS = {
  ip_restriction: 'module-ip-restriction',
  user_agent_filter: 'module-user-agent-filter',
  basic_auth: 'module-basic-auth',
  oauth: 'module-oauth',
  oidc: 'module-oidc',
  saml: 'module-saml',
  webhook_verification: 'module-webhook-verification',
  circuit_breaker: 'module-circuit-breaker',
  request_headers: 'module-request-headers',
  response_headers: 'module-response-headers',
  compression: 'module-compression',
  websocket_tcp_converter: 'module-websocket-tcp-converter',
} as const;

export type ModuleActionType = (typeof MODULE_ACTIONS)[keyof typeof MODULE_ACTIONS];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const moduleAction = (type: ModuleActionType, phases: readonly Phase[]) =>
  defineAction<Record<string, unknown>>({
    type,
    phases,
    fields: [],
    literal: true,
    check(c) {
      if (!isObject(c.config)) return problem(c, undefined, `${type}'s config is the route module's settings, an object`);
      if (c.config.enabled === false) return problem(c, 'enabled', `${type} with enabled: false: leave the rule out instead`);
      return c.config;
    },
  });

export const moduleActions = [
  moduleAction('module-ip-restriction', ['on_http_request', 'on_tcp_connect']),
  moduleAction('module-user-agent-filter', ['on_http_request']),
  moduleAction('module-basic-auth', ['on_http_request']),
  moduleAction('module-oauth', ['on_http_request']),
  moduleAction('module-oidc', ['on_http_request']),
  moduleAction('module-saml', ['on_http_request']),
  moduleAction('module-webhook-verification', ['on_http_request']),
  moduleAction('module-circuit-breaker', ['on_http_request']),
  moduleAction('module-request-headers', ['on_http_request']),
  moduleAction('module-response-headers', ['on_http_request']),
  moduleAction('module-compression', ['on_http_request']),
  moduleAction('module-websocket-tcp-converter', ['on_http_request']),
];
