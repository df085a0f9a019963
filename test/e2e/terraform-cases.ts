// One case per resource (at least one per resource type): its configuration at each stage
// of terraform-resources.test.ts and the change made behind terraform's back. `v2` changes
// in place, `v3` changes a replace-on-change field; a stage a case leaves out repeats the
// one before. A type with no replace-on-change field is replaced with `-replace` instead;
// those that others refer to create the replacement first (BEFORE_DESTROY), because the
// server refuses to delete what is in use.
import { expect } from 'vitest';
import { makePluginCert } from '../../provider/terraform/plugin-cert.js';
import type { Reply, TestServer } from '../helpers/server.js';
import { freshSshPublicKey } from '../helpers/ssh.js';

export type Stage = 'v1' | 'v2' | 'v3';

export interface Case {
  type: string;
  name: string;
  /** What the case shows beyond the basic cycle. */
  why: string;
  hcl: { v1: string; v2?: string; v3?: string };
  /** Changes the resource through the API; the next plan must put it back. */
  outOfBand(s: TestServer, values: Record<string, any>, path: string): Promise<Reply>;
  /** The out-of-band change deletes it (the plan then creates it again). */
  oobDeletes?: boolean;
  /** It has a write-only value, which an import takes from the configuration. */
  adoptsSecret?: boolean;
  checkLive?(live: Record<string, any>, stage: Stage): void;
}

const q = JSON.stringify;

const deployKey = freshSshPublicKey();
const laptopKey = freshSshPublicKey();
const laptopKey2 = freshSshPublicKey();
const certA = makePluginCert();
const certB = makePluginCert();
const describe = (text: string) => (s: TestServer, _v: Record<string, any>, path: string) => s.patch(path, { description: text });

const BEFORE_DESTROY = 'lifecycle {\n  create_before_destroy = true\n}';

const IDP_METADATA = `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://idp.example.com">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol"/>
</md:EntityDescriptor>`;

const RATE_LIMIT = `on_http_request:
  - actions:
      - type: rate-limit
        config:
          name: api
          algorithm: sliding_window
          capacity: 100
          rate: 60s
          bucket_key: [conn.client_ip]
`;

const CLOUD_POLICY = `on_http_request:
  - actions:
      - type: custom-response
        config: {status_code: 200, body: ok}
`;

export const cases: Case[] = [
  {
    type: 'edgeform_bot_user', name: 'ci', why: 'a kind without description',
    hcl: { v1: 'name = "ci-bot"', v2: 'name = "ci-bot-2"\nactive = false' },
    outOfBand: (s, _v, path) => s.patch(path, { name: 'renamed' }),
  },
  {
    type: 'edgeform_bot_user', name: 'ops', why: 'a second owner, for replacing a key by changing its owner',
    hcl: { v1: 'name = "ops-bot"' },
    outOfBand: (s, _v, path) => s.patch(path, { active: false }),
  },
  {
    type: 'edgeform_api_key', name: 'ci', why: 'a once-only token kept in state; owner_id replaces',
    hcl: {
      v1: 'description = "for CI"\nowner_id = edgeform_bot_user.ci.id',
      v2: 'description = "for CI, v2"\nowner_id = edgeform_bot_user.ci.id',
      v3: 'description = "for CI, v2"\nowner_id = edgeform_bot_user.ops.id',
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_credential', name: 'agent', why: 'deleted out of band: the plan creates it again; an owner set where the server chose one replaces',
    hcl: {
      v1: 'description = "agent"\nacl = ["bind:*.example.com"]',
      v2: 'description = "agent"\nacl = ["bind:*.example.com", "bind:api.example.com"]',
      v3: 'description = "agent"\nacl = ["bind:*.example.com", "bind:api.example.com"]\nowner_id = edgeform_bot_user.ops.id',
    },
    outOfBand: (s, _v, path) => s.del(path),
    oobDeletes: true,
  },
  {
    type: 'edgeform_ssh_credential', name: 'laptop', why: 'a public key held once; a new key replaces',
    hcl: {
      v1: `public_key = ${q(laptopKey)}\nacl = ["bind:laptop.example.com"]`,
      v2: `public_key = ${q(laptopKey)}\nacl = ["bind:laptop.example.com"]\ndescription = "ann's laptop"`,
      v3: `public_key = ${q(laptopKey2)}\nacl = ["bind:laptop.example.com"]\ndescription = "ann's laptop"`,
    },
    outOfBand: (s, _v, path) => s.patch(path, { acl: [] }),
  },
  {
    type: 'edgeform_ip_policy', name: 'office', why: 'the simplest kind',
    hcl: { v1: `description = "office"\n${BEFORE_DESTROY}`, v2: `description = "office, v2"\nmetadata = "{\\"team\\":\\"net\\"}"\n${BEFORE_DESTROY}` },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_ip_policy_rule', name: 'v4', why: 'a bare address the server stores as /32 shows no diff; action replaces',
    hcl: {
      v1: 'ip_policy_id = edgeform_ip_policy.office.id\ncidr = "10.1.2.3"\naction = "allow"',
      v2: 'ip_policy_id = edgeform_ip_policy.office.id\ncidr = "10.1.0.0/16"\naction = "allow"',
      v3: 'ip_policy_id = edgeform_ip_policy.office.id\ncidr = "10.1.0.0/16"\naction = "deny"',
    },
    outOfBand: (s, _v, path) => s.patch(path, { cidr: '192.168.0.0/24' }),
    checkLive: (live, stage) => stage === 'v1' && expect(live.cidr).toBe('10.1.2.3/32'),
  },
  {
    type: 'edgeform_ip_policy_rule', name: 'v6', why: 'an IPv6 network the server writes canonically',
    hcl: { v1: 'ip_policy_id = edgeform_ip_policy.office.id\ncidr = "2001:DB8:0:0::/64"\naction = "deny"' },
    outOfBand: describe('changed by hand'),
    checkLive: (live) => expect(live.cidr).toBe('2001:db8::/64'),
  },
  {
    type: 'edgeform_certificate_authority', name: 'clients', why: 'a PEM that replaces; the replacement comes first because a referrer restricts deletion',
    // An edge's mutual_tls refers to it, and the server refuses to delete a CA in use.
    hcl: {
      v1: `ca_pem = ${q(certA.certPem)}\n${BEFORE_DESTROY}`,
      v2: `ca_pem = ${q(certA.certPem)}\ndescription = "client CA"\n${BEFORE_DESTROY}`,
      v3: `ca_pem = ${q(certB.certPem)}\ndescription = "client CA"\n${BEFORE_DESTROY}`,
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_tls_certificate', name: 'web', why: 'a write-only private key, kept from configuration and adopted on import',
    hcl: {
      v1: `certificate_pem = ${q(certA.certPem)}\nprivate_key_pem = ${q(certA.keyPem)}`,
      v2: `certificate_pem = ${q(certA.certPem)}\nprivate_key_pem = ${q(certA.keyPem)}\ndescription = "web"`,
      v3: `certificate_pem = ${q(certB.certPem)}\nprivate_key_pem = ${q(certB.keyPem)}\ndescription = "web"`,
    },
    adoptsSecret: true,
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_ssh_certificate_authority', name: 'ops', why: 'a server-generated key; the key type replaces',
    hcl: {
      v1: 'private_key_type = "ed25519"',
      v2: 'private_key_type = "ed25519"\ndescription = "ops CA"',
      v3: 'private_key_type = "ecdsa"\ndescription = "ops CA"',
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_ssh_user_certificate', name: 'deploy', why: 'server defaults (validity) kept; principals replace',
    hcl: {
      v1: `ssh_certificate_authority_id = edgeform_ssh_certificate_authority.ops.id\npublic_key = ${q(deployKey)}\nprincipals = ["deploy"]`,
      v2: `ssh_certificate_authority_id = edgeform_ssh_certificate_authority.ops.id\npublic_key = ${q(deployKey)}\nprincipals = ["deploy"]\ndescription = "deploy"`,
      v3: `ssh_certificate_authority_id = edgeform_ssh_certificate_authority.ops.id\npublic_key = ${q(deployKey)}\nprincipals = ["deploy", "root"]\ndescription = "deploy"`,
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_tunnel_group_backend', name: 'prod', why: 'a map of labels',
    hcl: { v1: `labels = { env = "prod" }\n${BEFORE_DESTROY}`, v2: `labels = { env = "prod", region = "eu" }\n${BEFORE_DESTROY}` },
    outOfBand: (s, _v, path) => s.patch(path, { labels: { env: 'staging' } }),
  },
  {
    type: 'edgeform_http_response_backend', name: 'maintenance', why: 'header names the server lower-cases show no diff',
    hcl: {
      v1: `body = "down for maintenance"\nheaders = { "X-Served-By" = "edgeform" }\nstatus_code = 503\n${BEFORE_DESTROY}`,
      v2: `body = "back soon"\nheaders = { "X-Served-By" = "edgeform" }\nstatus_code = 503\n${BEFORE_DESTROY}`,
    },
    outOfBand: (s, _v, path) => s.patch(path, { status_code: 200 }),
    checkLive: (live) => expect(live.headers).toEqual({ 'x-served-by': 'edgeform' }),
  },
  {
    type: 'edgeform_weighted_backend', name: 'split', why: 'a map keyed by the ids of other resources',
    hcl: {
      v1: `backends = {\n  (edgeform_tunnel_group_backend.prod.id) = 70\n  (edgeform_http_response_backend.maintenance.id) = 30\n}\n${BEFORE_DESTROY}`,
      v2: `backends = {\n  (edgeform_tunnel_group_backend.prod.id) = 50\n  (edgeform_http_response_backend.maintenance.id) = 50\n}\n${BEFORE_DESTROY}`,
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_https_edge', name: 'web', why: 'hostports the server lower-cases; edge modules as blocks',
    hcl: {
      v1: 'hostports = ["App.Example.com:443"]\ntls_termination {\n  min_version = "1.3"\n}',
      v2: 'hostports = ["App.Example.com:443"]\ndescription = "web"\ntls_termination {\n  min_version = "1.2"\n}\nmutual_tls {\n  certificate_authority_ids = [edgeform_certificate_authority.clients.id]\n}',
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_https_edge', name: 'other', why: 'a second edge, for moving a route (edge_id replaces)',
    hcl: { v1: 'hostports = ["other.example.com:443"]' },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_https_edge_route', name: 'api', why: 'modules as blocks, switching authentication module, a secret in a module',
    hcl: {
      v1: `edge_id = edgeform_https_edge.web.id
match_type = "path_prefix"
match = "/api"
backend {
  backend_id = edgeform_weighted_backend.split.id
}
ip_restriction {
  ip_policy_ids = [edgeform_ip_policy.office.id]
}
circuit_breaker {
  error_threshold_percentage = 0.25
}
request_headers {
  add = { "X-Env" = "prod" }
  remove = ["X-Debug"]
}
oauth {
  provider {
    github {
      client_id = "gh-client"
      client_secret = "gh-secret"
      teams = ["acme/ops"]
    }
  }
}`,
      v2: `edge_id = edgeform_https_edge.web.id
match_type = "path_prefix"
match = "/api"
description = "api"
backend {
  backend_id = edgeform_weighted_backend.split.id
}
ip_restriction {
  ip_policy_ids = [edgeform_ip_policy.office.id]
}
compression {}
request_headers {
  add = { "X-Env" = "prod" }
  remove = ["X-Debug"]
}
oidc {
  issuer = "https://accounts.example.com"
  client_id = "oidc-client"
  client_secret = "oidc-secret"
  scopes = ["openid", "email"]
}`,
    },
    adoptsSecret: true,
    outOfBand: (s, v) => s.del(`/edges/https/${v.edge_id}/routes/${v.id}/request_headers`),
  },
  {
    type: 'edgeform_https_edge_route', name: 'hooks', why: 'the other modules; moving it to another edge replaces it',
    hcl: {
      v1: `edge_id = edgeform_https_edge.web.id
match_type = "exact_path"
match = "/hooks"
webhook_verification {
  provider = "GitHub"
  secret = "whsec"
}
response_headers {
  add = { "Cache-Control" = "no-store" }
}
user_agent_filter {
  deny = ["^curl/"]
}
websocket_tcp_converter {}
traffic_policy {
  value = ${q(RATE_LIMIT)}
}`,
      v2: `edge_id = edgeform_https_edge.web.id
match_type = "exact_path"
match = "/hooks"
webhook_verification {
  provider = "sns"
}
response_headers {
  add = { "Cache-Control" = "no-store" }
}
user_agent_filter {
  deny = ["^curl/", "^Wget/"]
}
websocket_tcp_converter {
  enabled = false
}
traffic_policy {
  value = ${q(RATE_LIMIT)}
}`,
      v3: `edge_id = edgeform_https_edge.other.id
match_type = "exact_path"
match = "/hooks"
saml {
  idp_metadata = ${q(IDP_METADATA)}
  authorized_groups = ["ops"]
}`,
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_tcp_edge', name: 'db', why: 'a backend module referring to a backend',
    hcl: {
      v1: 'hostports = ["db.example.com:5432"]\nbackend {\n  backend_id = edgeform_tunnel_group_backend.prod.id\n}',
      v2: `hostports = ["db.example.com:5432"]\nbackend {\n  backend_id = edgeform_tunnel_group_backend.prod.id\n}\nip_restriction {\n  ip_policy_ids = [edgeform_ip_policy.office.id]\n}\ntraffic_policy {\n  value = ${q('on_tcp_connect:\n  - actions:\n      - type: deny\n        config: {}\n')}\n}`,
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_tls_edge', name: 'passthrough', why: 'a module whose default depends on another field (min_version null upstream, 1.2 at the edge)',
    hcl: {
      v1: 'hostports = ["tls.example.com:8443"]\ntls_termination {\n  terminate_at = "upstream"\n}\nbackend {\n  backend_id = edgeform_tunnel_group_backend.prod.id\n}',
      v2: 'hostports = ["tls.example.com:8443"]\ntls_termination {\n  terminate_at = "edge"\n}\nbackend {\n  backend_id = edgeform_tunnel_group_backend.prod.id\n}',
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_event_destination', name: 'log', why: 'a nested block with an empty block inside',
    hcl: { v1: `target {\n  log {}\n}\n${BEFORE_DESTROY}`, v2: `description = "log"\ntarget {\n  log {}\n}\n${BEFORE_DESTROY}` },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_event_destination', name: 'hook', why: 'a write-only secret nested two blocks deep',
    hcl: {
      v1: 'target {\n  http {\n    url = "http://127.0.0.1:9/events"\n    secret = "hmac-key"\n  }\n}',
      v2: 'target {\n  http {\n    url = "http://127.0.0.1:9/events"\n    secret = "hmac-key-2"\n  }\n}',
    },
    adoptsSecret: true,
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_event_subscription', name: 'audit', why: 'a list of blocks',
    hcl: {
      v1: 'destination_ids = [edgeform_event_destination.log.id]\nsources {\n  type = "ip_policy_created.v0"\n}',
      v2: 'destination_ids = [edgeform_event_destination.log.id]\nsources {\n  type = "ip_policy_created.v0"\n}\nsources {\n  type = "ip_policy_deleted.v0"\n}',
    },
    outOfBand: describe('changed by hand'),
  },
  {
    type: 'edgeform_cloud_endpoint', name: 'site', why: 'type left out, as the service\'s resource allows; bindings follow the host; a policy as YAML text',
    hcl: {
      v1: `url = "https://site.example.com"\ntraffic_policy = ${q(CLOUD_POLICY)}`,
      v2: `url = "https://site.example.com"\ntraffic_policy = ${q(CLOUD_POLICY)}\ndescription = "the site"\npooling_enabled = true`,
    },
    outOfBand: describe('changed by hand'),
    checkLive: (live) => expect(live).toMatchObject({ type: 'cloud', bindings: ['public'] }),
  },
];
