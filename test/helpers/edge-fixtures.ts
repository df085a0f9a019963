// Module samples for the edge and route suites: for every module of every edge kind, a
// body that sets every field to a value other than its default (`full`) and a body with
// only what is required (`minimal`), each with the read form the API must return. The
// suites check that every catalog module has a sample here, so a new module without one
// fails the tests rather than going untested.
import { expect } from 'vitest';
import type { KindEntry } from '../../provider/catalog/index.js';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import type { TestServer } from './server.js';

type Doc = Record<string, any>;
export interface Ref { id: string; uri: string }

/** Resources the samples refer to. */
export interface Refs {
  backend: Ref;
  otherBackend: Ref;
  policies: [Ref, Ref];
  ca: Ref;
}

export interface Sample { input: Doc; read: Doc }
export interface ModuleSamples { full: Sample; minimal: Sample }

const ref = (r: Ref) => ({ id: r.id, uri: r.uri });
/** A sample that reads back exactly as written. */
const same = (doc: Doc): Sample => ({ input: doc, read: doc });

export const IDP_METADATA = `<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://idp.example.com/metadata">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example.com/sso"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>`;

export const HTTP_POLICY = `on_http_request:
  - name: limit per client
    expressions: []
    actions:
      - type: rate-limit
        config:
          name: per-ip
          algorithm: sliding_window
          capacity: 100
          rate: 90s
          bucket_key: [conn.client_ip, "req.headers['x-api-key']"]
`;

export const TCP_POLICY = JSON.stringify({
  on_tcp_connect: [{ name: 'block one', expressions: ["conn.client_ip == '192.0.2.7'"], actions: [{ type: 'deny' }] }],
});

const OAUTH_MEMBERS = ['github', 'facebook', 'microsoft', 'google', 'linkedin', 'gitlab', 'twitch', 'amazon'];
const oauthProvider = (set: Record<string, Doc>) => Object.fromEntries(OAUTH_MEMBERS.map((m) => [m, set[m] ?? null]));
const session = { options_passthrough: true, cookie_prefix: 'my.app.', inactivity_timeout: 300, maximum_duration: 86400 };
const sessionDefaults = { options_passthrough: false, cookie_prefix: 'service.', inactivity_timeout: 0, maximum_duration: 0 };

/** SAML's computed fields under the base URL `url`. */
export function samlComputed(url: string): Doc {
  const base = `${url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/saml/edghtsrt_\\w{27}`;
  return {
    entity_id: expect.stringMatching(new RegExp(`^${base}$`)),
    metadata_url: expect.stringMatching(new RegExp(`^${base}/metadata$`)),
    assertion_consumer_service_url: expect.stringMatching(new RegExp(`^${base}/acs$`)),
    single_logout_url: expect.stringMatching(new RegExp(`^${base}/slo$`)),
    request_signing_certificate_pem: expect.stringMatching(/^-----BEGIN CERTIFICATE-----\n[\s\S]+\n-----END CERTIFICATE-----\n$/),
  };
}

/** Samples of every module of HTTPS routes and of each edge kind, by catalog kind. */
export function moduleSamples(kind: KindEntry, r: Refs, url: string): Record<string, ModuleSamples> {
  const backend: ModuleSamples = {
    full: { input: { enabled: false, backend_id: r.backend.id }, read: { enabled: false, backend: ref(r.backend) } },
    minimal: { input: { backend_id: r.otherBackend.id }, read: { enabled: true, backend: ref(r.otherBackend) } },
  };
  const ipRestriction: ModuleSamples = {
    full: { input: { enabled: false, ip_policy_ids: r.policies.map((p) => p.id) }, read: { enabled: false, ip_policies: r.policies.map(ref) } },
    minimal: { input: {}, read: { enabled: true, ip_policies: [] } },
  };
  const policy = (value: string): ModuleSamples => ({
    full: same({ enabled: false, value }),
    minimal: { input: { value: '' }, read: { enabled: true, value: '' } },
  });
  const mutualTls: ModuleSamples = {
    full: { input: { enabled: false, certificate_authority_ids: [r.ca.id] }, read: { enabled: false, certificate_authorities: [ref(r.ca)] } },
    minimal: { input: {}, read: { enabled: true, certificate_authorities: [] } },
  };
  if (kind.kind === 'HTTPSEdge') {
    return {
      mutual_tls: mutualTls,
      tls_termination: {
        full: { input: { enabled: false, min_version: '1.3' }, read: { enabled: false, terminate_at: 'edge', min_version: '1.3' } },
        minimal: { input: {}, read: { enabled: true, terminate_at: 'edge', min_version: '1.2' } },
      },
    };
  }
  if (kind.kind === 'TCPEdge') return { backend, ip_restriction: ipRestriction, traffic_policy: policy(TCP_POLICY) };
  if (kind.kind === 'TLSEdge') {
    return {
      backend,
      ip_restriction: ipRestriction,
      mutual_tls: mutualTls,
      tls_termination: {
        full: same({ enabled: false, terminate_at: 'agent', min_version: '1.1' }),
        minimal: { input: {}, read: { enabled: true, terminate_at: 'edge', min_version: '1.2' } },
      },
      traffic_policy: policy(TCP_POLICY),
    };
  }
  if (kind.kind !== 'HTTPSEdgeRoute') throw new Error(`no module samples for ${kind.kind}`);
  const samlFull = {
    enabled: false,
    ...session,
    idp_metadata: IDP_METADATA,
    force_authn: true,
    allow_idp_initiated: true,
    authorized_groups: ['engineering', 'ops'],
    nameid_format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient',
  };
  const headers = (what: string): ModuleSamples => ({
    full: same({ enabled: false, add: { [`x-${what}-id`]: 'abc 123', 'x-empty': '' }, remove: [`x-${what}-secret`, 'server'] }),
    minimal: { input: {}, read: { enabled: true, add: {}, remove: [] } },
  });
  return {
    backend,
    ip_restriction: ipRestriction,
    circuit_breaker: {
      full: same({ enabled: false, tripped_duration: 30, rolling_window: 120, num_buckets: 128, volume_threshold: 7, error_threshold_percentage: 0.25 }),
      minimal: {
        input: {},
        read: { enabled: true, tripped_duration: 10, rolling_window: 10, num_buckets: 10, volume_threshold: 20, error_threshold_percentage: 0.5 },
      },
    },
    compression: { full: same({ enabled: false }), minimal: { input: {}, read: { enabled: true } } },
    request_headers: headers('request'),
    response_headers: headers('response'),
    webhook_verification: {
      full: { input: { enabled: false, provider: 'Stripe', secret: 'whsec_0123456789' }, read: { enabled: false, provider: 'Stripe', secret: null } },
      minimal: { input: { provider: 'sns' }, read: { enabled: true, provider: 'sns', secret: null } },
    },
    oauth: {
      full: {
        input: {
          enabled: false,
          provider: { github: { client_id: 'Iv1.abc', client_secret: 'gh-secret', scopes: ['read:org'], email_addresses: ['ann@example.com'], email_domains: ['example.com'], teams: ['acme/ops'], organizations: ['acme'] } },
          ...session,
          auth_check_interval: 600,
        },
        read: {
          enabled: false,
          provider: oauthProvider({ github: { client_id: 'Iv1.abc', client_secret: null, scopes: ['read:org'], email_addresses: ['ann@example.com'], email_domains: ['example.com'], teams: ['acme/ops'], organizations: ['acme'] } }),
          ...session,
          auth_check_interval: 600,
        },
      },
      minimal: {
        input: { provider: { google: {} } },
        read: {
          enabled: true,
          provider: oauthProvider({ google: { client_id: null, client_secret: null, scopes: [], email_addresses: [], email_domains: [] } }),
          ...sessionDefaults,
          auth_check_interval: 0,
        },
      },
    },
    saml: {
      full: { input: samlFull, read: { ...samlFull, ...samlComputed(url) } },
      minimal: {
        input: { idp_metadata: IDP_METADATA },
        read: {
          enabled: true,
          ...sessionDefaults,
          idp_metadata: IDP_METADATA,
          force_authn: false,
          allow_idp_initiated: false,
          authorized_groups: [],
          nameid_format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
          ...samlComputed(url),
        },
      },
    },
    oidc: {
      full: {
        input: { enabled: false, ...session, issuer: 'https://accounts.example.com', client_id: 'app-1', client_secret: 'oidc-secret', scopes: ['openid', 'email'] },
        read: { enabled: false, ...session, issuer: 'https://accounts.example.com', client_id: 'app-1', client_secret: null, scopes: ['openid', 'email'] },
      },
      minimal: {
        input: { issuer: 'https://login.example.org/tenant', client_id: 'app-2', client_secret: 's' },
        read: { enabled: true, ...sessionDefaults, issuer: 'https://login.example.org/tenant', client_id: 'app-2', client_secret: null, scopes: [] },
      },
    },
    websocket_tcp_converter: { full: same({ enabled: false }), minimal: { input: {}, read: { enabled: true } } },
    user_agent_filter: {
      full: same({ enabled: false, allow: ['^curl/\\d+', '(?i)firefox'], deny: ['(?i)(bot|crawler|spider)', '(?P<tool>wget)'] }),
      minimal: { input: {}, read: { enabled: true, allow: [], deny: [] } },
    },
    traffic_policy: policy(HTTP_POLICY),
  };
}

/** A CA certificate in PEM, as an X.509 certificate authority resource takes it. */
export function caPem(name = 'Test client CA'): string {
  return issueCertificate({ subject: { commonName: name }, ca: true, keyUsages: ['key_cert_sign', 'crl_sign', 'digital_signature'] }).certificatePem;
}

async function created(s: TestServer, path: string, body: Doc): Promise<Ref> {
  const r = await s.post(path, body);
  if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.text}`);
  return { id: r.body.id, uri: r.body.uri };
}

/** Creates the resources the samples refer to. */
export async function createRefs(s: TestServer): Promise<Refs> {
  return {
    backend: await created(s, '/backends/http_response', { body: 'ok', status_code: 200 }),
    otherBackend: await created(s, '/backends/tunnel_group', { labels: { app: 'web' } }),
    policies: [await created(s, '/ip_policies', { description: 'office' }), await created(s, '/ip_policies', { description: 'vpn' })],
    ca: await created(s, '/certificate_authorities', { ca_pem: caPem() }),
  };
}

let hostCounter = 0;
/**
 * A hostport no other test uses. Without a port, its port is fresh too: a port carries one
 * kind of edge (and one TCP edge), so suites that create every kind must not share one.
 */
export const freshHostport = (port?: number) => {
  const n = ++hostCounter;
  return `h${process.pid}-${n}.example.com:${port ?? 20000 + (n % 40000)}`;
};
