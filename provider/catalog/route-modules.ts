// The thirteen HTTPS route modules. Each is one entry; the server, client, reconciler and
// provider find them through the `module` trait.
import { z } from 'zod';
import { boundedList, computed, cookiePrefix, headerMap, headerNames, ITEM_LIMITS, regex, secret, uint32, url } from './fields.js';
import { backendModule, ipRestrictionModule, module, trafficPolicyModule } from './modules.js';
import { xmlRootProblem } from './validate/xml.js';

export const OAUTH_PROVIDERS = ['github', 'facebook', 'microsoft', 'google', 'linkedin', 'gitlab', 'twitch', 'amazon'] as const;
const OAUTH_NAMES: Record<(typeof OAUTH_PROVIDERS)[number], string> = {
  github: 'GitHub', facebook: 'Facebook', microsoft: 'Microsoft', google: 'Google', linkedin: 'LinkedIn', gitlab: 'GitLab', twitch: 'Twitch', amazon: 'Amazon',
};

/** Webhook senders whose signatures the service can verify (a file of its own: the traffic-policy checker reads it too). */
export { WEBHOOK_PROVIDERS } from './webhook-providers.js';
import { WEBHOOK_PROVIDERS } from './webhook-providers.js';

const NAMEID_FORMATS = [
  'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
  'urn:oasis:names:tc:SAML:2.0:nameid-format:transient',
  'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
  'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
] as const;
/**
 * Other spellings of the same four formats, accepted and echoed as given: DECISIONS names
 * them by their short names (`persistent`, `emailAddress`), and SAML 2.0 lists
 * emailAddress and unspecified among its formats, so clients also write them under the 2.0
 * namespace. The default stays the full 2.0 persistent URN, as SPEC words it.
 */
const NAMEID_ALIASES = [
  'persistent',
  'transient',
  'emailAddress',
  'unspecified',
  'urn:oasis:names:tc:SAML:2.0:nameid-format:emailAddress',
  'urn:oasis:names:tc:SAML:2.0:nameid-format:unspecified',
] as const;

const shortList = () => boundedList(z.string().min(1).max(255), ITEM_LIMITS.strings).default([]);
const sessionFields = () => ({
  options_passthrough: z.boolean().default(false).describe('When true, OPTIONS requests are not authenticated (for CORS).'),
  cookie_prefix: cookiePrefix().describe('Prefix of the session cookie; letters, digits and periods.'),
  inactivity_timeout: uint32().default(0).describe('Seconds of inactivity before the session ends; 0 for the default.'),
  maximum_duration: uint32().default(0).describe('Maximum seconds of an authenticated session; 0 for the default.'),
});

function oauthMember(name: string) {
  const orgs = name === 'github'
    ? {
        teams: boundedList(z.string().max(255).regex(/^[^/\s]+\/[^/\s]+$/, 'teams are <org>/<team>'), ITEM_LIMITS.strings).default([]).describe('Team slugs, <org>/<team>.'),
        organizations: shortList().describe('Organization slugs.'),
      }
    : {};
  return z
    .strictObject({
      client_id: z.string().min(1).max(255).optional().describe('Your OAuth app client id; omit to use the managed app.'),
      client_secret: secret(z.string().min(1).max(255).optional()).describe('Your OAuth app client secret; required with client_id.'),
      scopes: shortList().describe('Scopes to request; only with your own client_id and client_secret.'),
      email_addresses: shortList().describe('Email addresses allowed access.'),
      email_domains: shortList().describe('Email domains allowed access.'),
      ...orgs,
    })
    .superRefine((m, ctx) => {
      if (m.client_id !== undefined && m.client_secret === undefined) {
        ctx.addIssue({ code: 'custom', path: ['client_secret'], message: 'client_secret is required when client_id is set' });
      }
      if (m.client_id === undefined && m.client_secret !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['client_id'], message: 'client_id is required when client_secret is set' });
      }
      if (m.scopes.length > 0 && (m.client_id === undefined || m.client_secret === undefined)) {
        ctx.addIssue({ code: 'custom', path: ['scopes'], message: 'scopes may be set only with both client_id and client_secret' });
      }
    })
    .nullable()
    .optional()
    .describe(`Log in with ${OAUTH_NAMES[name as (typeof OAUTH_PROVIDERS)[number]]}; null when unused.`);
}

export const routeModules = {
  backend: backendModule(),
  ip_restriction: ipRestrictionModule(),
  circuit_breaker: module({
    tripped_duration: uint32().default(10).describe('Seconds a tripped circuit waits before re-checking upstream health.'),
    rolling_window: uint32().default(10).describe('Seconds of the statistical rolling window.'),
    num_buckets: uint32().max(128, 'num_buckets is at most 128').default(10).describe('Buckets metrics are kept in (0..128; 0 means the default, 10).'),
    volume_threshold: uint32().default(20).describe('Requests in a rolling window that can trip the circuit.'),
    error_threshold_percentage: z
      .number()
      .min(0, 'a fraction from 0 to 1.0')
      .max(1, 'a fraction from 0 to 1.0, not a percentage')
      .default(0.5)
      .describe('Error fraction (0..1.0) that trips the circuit.'),
  }).describe('Stops sending requests upstream while too many of them fail.'),
  compression: module({}).describe('Compresses responses for clients that accept compression.'),
  request_headers: module({
    add: headerMap().default({}).describe('Headers to add to the request before it goes upstream.'),
    remove: headerNames().default([]).describe('Header names to remove from the request.'),
  }).describe('Adds and removes request headers before the request goes upstream.'),
  response_headers: module({
    add: headerMap().default({}).describe('Headers to add to the response.'),
    remove: headerNames().default([]).describe('Header names to remove from the response.'),
  }).describe('Adds and removes headers of the response returned to the client.'),
  webhook_verification: module(
    {
      provider: z
        .string()
        .superRefine((v, ctx) => {
          if (!(WEBHOOK_PROVIDERS as readonly string[]).includes(v.toLowerCase())) {
            ctx.addIssue({ code: 'custom', message: `unknown webhook provider "${v}"; known providers include ${WEBHOOK_PROVIDERS.slice(0, 8).join(', ')}, ... (see docs/api.md)` });
          }
        })
        .describe('The webhook sender, e.g. github, stripe, slack, sns.'),
      secret: secret(z.string().min(1).max(4096).optional()).describe('Signing secret; required for every provider except sns.'),
    },
    (m, ctx) => {
      if (m.secret === undefined && String(m.provider).toLowerCase() !== 'sns') {
        ctx.addIssue({ code: 'custom', path: ['secret'], message: `secret is required for provider ${m.provider}` });
      }
    },
  ).describe("Accepts only requests that carry the webhook sender's valid signature."),
  oauth: module(
    {
      provider: z
        .strictObject(Object.fromEntries(OAUTH_PROVIDERS.map((p) => [p, oauthMember(p)])) as Record<(typeof OAUTH_PROVIDERS)[number], ReturnType<typeof oauthMember>>)
        .superRefine((p, ctx) => {
          const set = Object.entries(p).filter(([, v]) => v != null).map(([k]) => k);
          if (set.length !== 1) {
            ctx.addIssue({ code: 'custom', message: `set exactly one identity provider (${OAUTH_PROVIDERS.join(', ')}); got ${set.length ? set.join(', ') : 'none'}` });
          }
        })
        .describe('Exactly one identity provider.'),
      ...sessionFields(),
      auth_check_interval: uint32().default(0).describe('Seconds after which user state is refreshed from the provider.'),
    },
  ).describe('Requires users to log in with a third-party identity provider (OAuth).'),
  saml: module({
    ...sessionFields(),
    idp_metadata: z
      .string()
      .min(1)
      .max(262144)
      .superRefine((v, ctx) => {
        const p = xmlRootProblem(v, 'EntityDescriptor');
        if (p) ctx.addIssue({ code: 'custom', message: `idp_metadata must be an XML EntityDescriptor: ${p}` });
      })
      .describe('The IdP entity descriptor, XML.'),
    force_authn: z.boolean().default(false).describe('When true the IdP must re-prompt for credentials.'),
    allow_idp_initiated: z.boolean().default(false).describe('When true the IdP may start a login.'),
    authorized_groups: shortList().describe('Only members of these groups may access the endpoint.'),
    nameid_format: z
      .enum([...NAMEID_FORMATS, ...NAMEID_ALIASES], { error: `must be one of the formats persistent, transient, emailAddress or unspecified, by short name or full URN (e.g. ${NAMEID_FORMATS[0]})` })
      .default(NAMEID_FORMATS[0])
      .describe('Name-identifier format expected in assertions.'),
    entity_id: computed(z.string().optional()).describe('Entity id of the service provider (set by the server).'),
    metadata_url: computed(z.string().optional()).describe('URL of the service provider metadata, for the IdP (set by the server).'),
    assertion_consumer_service_url: computed(z.string().optional()).describe('URL the IdP sends assertions to (set by the server).'),
    single_logout_url: computed(z.string().optional()).describe('URL of the single logout endpoint (set by the server).'),
    request_signing_certificate_pem: computed(z.string().optional()).describe('Certificate that signs the requests to the IdP, PEM (set by the server).'),
  }).describe('Requires users to log in with a SAML identity provider.'),
  oidc: module({
    ...sessionFields(),
    issuer: url().describe('URL of the OpenID provider (discovery base).'),
    client_id: z.string().min(1).max(255).describe('App client id and audience.'),
    client_secret: secret(z.string().min(1).max(255)).describe('App client secret.'),
    scopes: shortList().describe('Scopes to request.'),
  }).describe('Requires users to log in with an OpenID Connect provider.'),
  websocket_tcp_converter: module({}).describe('Carries WebSocket connections to the upstream as TCP streams.'),
  user_agent_filter: module({
    allow: boundedList(regex(), ITEM_LIMITS.strings).default([]).describe('Regular expressions; matching user agents are allowed.'),
    deny: boundedList(regex(), ITEM_LIMITS.strings).default([]).describe('Regular expressions; matching user agents are denied.'),
  }).describe('Allows or denies requests by their User-Agent header.'),
  traffic_policy: trafficPolicyModule(),
};

/** At most one of these authentication modules per route. */
export const AUTH_MODULES = ['oauth', 'oidc', 'saml'] as const;
