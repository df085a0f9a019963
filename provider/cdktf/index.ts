// CDKTF constructs for edgeform: the bindings generated from the provider schema (one
// class per resource type, under its namespace) and a few higher-level constructs.
export * from './gen/index.js';
export { EdgeformProvider, type EdgeformProviderConfig } from './gen/provider/index.js';
export { HttpsEdgeWithRoutes, type HttpsEdgeWithRoutesProps, type RouteProps } from './https-edge-with-routes.js';
export { IpPolicyWithRules, type IpPolicyWithRulesProps, type RuleProps } from './ip-policy-with-rules.js';
