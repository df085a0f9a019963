// The manifest JSON Schema (docs/manifest.schema.json) checked with a real draft 2020-12
// validator: sample documents of every kind pass, each kind of mistake fails, and the
// schema agrees with the catalog's traits (secrets marked, references accept Kind/name and
// ids, children nested without their parent field, unknown keys refused).
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { documentFieldPaths } from '../../reconciler/manifest/field-paths.js';
import { manifestJsonSchema } from '../../reconciler/manifest/json-schema.js';
import { childSpecsOf, manifestKind, manifestKinds } from '../../reconciler/manifest/kinds.js';
import { findKind } from '../../provider/catalog/index.js';

type Json = Record<string, any>;

const schema = manifestJsonSchema();
// strict: unknown keywords, formats or malformed schemas are errors, not warnings.
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats.default(ajv);
const validate = ajv.compile(schema);

const problemsOf = (doc: Json) => (validate(doc) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`));

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n';

/** One realistic document per manifest kind, plus the example; a new kind needs a row here. */
const samples: [reason: string, doc: Json][] = [
  ['a bot user: its document name is its name', { kind: 'BotUser', name: 'ci-bot', active: false }],
  ['an API key owned by a declared bot', { kind: 'APIKey', name: 'ci', owner_id: 'BotUser/ci-bot' }],
  ['a credential owned by a raw user id', { kind: 'Credential', name: 'agent', acl: ['bind:*.example.com'], owner_id: 'usr_2abc' }],
  ['an SSH credential: a public key with a comment and bind rules', { kind: 'SSHCredential', name: 'laptop', public_key: 'ssh-ed25519 AAAA ann@laptop', acl: ['bind:ann.example.com'] }],
  ['an IP policy with nested rules', { kind: 'IPPolicy', name: 'office', description: 'office networks', rules: [{ cidr: '203.0.113.0/24', action: 'allow' }, { cidr: '10.0.0.0/8', action: 'deny', description: 'lab' }] }],
  ['a CA from a file', { kind: 'CertificateAuthority', name: 'clients', ca_pem: '${file:certs/ca.pem}' }],
  ['a TLS certificate with its key from the environment', { kind: 'TLSCertificate', name: 'web', certificate_pem: PEM, private_key_pem: '${env:WEB_KEY}', prevent_destroy: true }],
  ['a literal PEM key', { kind: 'TLSCertificate', name: 'web2', certificate_pem: PEM, private_key_pem: KEY }],
  ['an SSH CA', { kind: 'SSHCertificateAuthority', name: 'ssh', private_key_type: 'ecdsa', elliptic_curve: 'p384' }],
  ['an SSH user certificate', { kind: 'SSHUserCertificate', name: 'alice', ssh_certificate_authority_id: 'SSHCertificateAuthority/ssh', public_key: 'ssh-ed25519 AAAA alice', principals: ['alice'], valid_after: '2026-01-02T15:04:05Z' }],
  ['a tunnel group backend', { kind: 'TunnelGroupBackend', name: 'pool', labels: { env: 'prod' } }],
  ['an HTTP response backend', { kind: 'HTTPResponseBackend', name: 'hello', body: 'hello', status_code: 200, headers: { 'Content-Type': 'text/plain' } }],
  ['a weighted backend keyed by references and ids', { kind: 'WeightedBackend', name: 'split', backends: { 'TunnelGroupBackend/pool': 90, 'HTTPResponseBackend/hello': 10, bkdwd_1x: 0 } }],
  [
    'the issue\'s HTTPS edge',
    {
      kind: 'HTTPSEdge',
      name: 'web',
      id: 'edghts_1',
      hostports: ['app.example.com:443'],
      mutual_tls: { certificate_authority_ids: ['CertificateAuthority/clients', 'ca_2'] },
      tls_termination: { min_version: '1.3' },
      routes: [
        {
          match_type: 'path_prefix',
          match: '/',
          backend: { backend_id: 'HTTPResponseBackend/hello' },
          ip_restriction: { ip_policy_ids: ['IPPolicy/office'] },
          oauth: { provider: { github: { client_id: 'abc', client_secret: '${env:GH_SECRET}' } } },
          compression: {},
          webhook_verification: null,
        },
        { match_type: 'exact_path', match: '/hook', webhook_verification: { provider: 'stripe', secret: '${env:HOOK}' }, traffic_policy: { value: 'on_http_request: []' } },
      ],
    },
  ],
  ['a TCP edge', { kind: 'TCPEdge', name: 'db', hostports: ['tcp.example.com:5432'], backend: { backend_id: 'TunnelGroupBackend/pool' }, ip_restriction: { enabled: false, ip_policy_ids: [] } }],
  ['a TLS edge passing TLS through', { kind: 'TLSEdge', name: 'tls', hostports: ['tls.example.com:443'], tls_termination: { terminate_at: 'upstream', min_version: null } }],
  ['an event destination with its secret from the environment', { kind: 'EventDestination', name: 'hook', target: { http: { url: 'https://hooks.example.com/in', secret: '${env:HOOK_SECRET}' } } }],
  ['an event subscription', { kind: 'EventSubscription', name: 'edges', sources: [{ type: 'https_edge_created.v0' }], destination_ids: ['EventDestination/hook'] }],
  ['an enum given by interpolation', { kind: 'SSHCertificateAuthority', name: 'ssh2', private_key_type: '${env:KEY_TYPE}' }],
  ['a cloud endpoint, type left out', { kind: 'CloudEndpoint', name: 'site', url: 'https://app.example.com', traffic_policy: 'on_http_request:\n  - actions: [{type: deny}]\n' }],
  ['an internal pooled cloud endpoint', { kind: 'CloudEndpoint', name: 'api', type: 'cloud', url: 'https://api.internal', bindings: ['internal'], pooling_enabled: true, traffic_policy: '{"on_http_request":[{"actions":[{"type":"deny"}]}]}' }],
];

describe('the manifest JSON Schema accepts', () => {
  it.each(samples)('%s', (_reason, doc) => {
    expect(problemsOf(doc)).toEqual([]);
  });

  it('a sample of every manifest kind (add one for a new kind)', () => {
    expect(new Set(samples.map(([, d]) => d.kind))).toEqual(new Set(manifestKinds.map((k) => k.kind)));
  });
});

describe('the examples in docs/manifest.md', () => {
  const text = fs.readFileSync(path.resolve(import.meta.dirname, '../../docs/manifest.md'), 'utf8');
  // Every YAML example but edgeform.yaml's (`stack: NAME` alone), which names a stack and is no manifest.
  const docs = [...text.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .flatMap((m) => parseAllDocuments(m[1]).map((d) => d.toJS() as Json))
    .filter((d) => Object.keys(d).join() !== 'stack');
  it.each(docs.map((d) => [`${d.kind}/${d.name}`, d] as const))('%s is valid', (_address, doc) => {
    expect(problemsOf(doc)).toEqual([]);
  });

  it('are there', () => expect(docs.length).toBeGreaterThanOrEqual(5));
});

const edge = (route: Json) => ({ kind: 'HTTPSEdge', name: 'web', routes: [{ match_type: 'path_prefix', match: '/', ...route }] });

/** Each mistake and the instance path the validator must blame. */
const mistakes: [reason: string, doc: Json, blamed: string][] = [
  ['an unknown kind', { kind: 'Edge', name: 'x' }, '/kind'],
  ['a kind that is not a document (children nest)', { kind: 'IPPolicyRule', name: 'x', cidr: '10.0.0.0/8', action: 'allow' }, '/kind'],
  ['a read-only kind', { kind: 'User', name: 'x' }, '/kind'],
  ['a cloud endpoint of type agent (agents make those)', { kind: 'CloudEndpoint', name: 'x', type: 'agent', url: 'https://a.example.com', traffic_policy: 'on_http_request: []' }, '/type'],
  ['no name', { kind: 'IPPolicy' }, ''],
  ['a name with a slash (it would break Kind/name)', { kind: 'IPPolicy', name: 'a/b' }, '/name'],
  ['a name starting with a dot', { kind: 'IPPolicy', name: '.x' }, '/name'],
  ['an unknown top-level key', { kind: 'IPPolicy', name: 'x', colour: 'red' }, ''],
  ['a read-only field of the read form', { kind: 'IPPolicy', name: 'x', created_at: '2026-01-01T00:00:00Z' }, ''],
  ['an id of another kind', { kind: 'IPPolicy', name: 'x', id: 'edghts_1' }, '/id'],
  ['prevent_destroy as text', { kind: 'IPPolicy', name: 'x', prevent_destroy: 'yes' }, '/prevent_destroy'],
  ['a rule naming its parent (the nesting says it)', { kind: 'IPPolicy', name: 'x', rules: [{ cidr: '10.0.0.0/8', action: 'allow', ip_policy_id: 'ipp_1' }] }, '/rules/0'],
  ['a rule without its natural key', { kind: 'IPPolicy', name: 'x', rules: [{ action: 'allow' }] }, '/rules/0'],
  ['a rule action outside the enum', { kind: 'IPPolicy', name: 'x', rules: [{ cidr: '10.0.0.0/8', action: 'maybe' }] }, '/rules/0/action'],
  ['children of another kind', { kind: 'TCPEdge', name: 'x', routes: [] }, ''],
  ['a backend reference to a policy', edge({ backend: { backend_id: 'IPPolicy/office' } }), '/routes/0/backend/backend_id'],
  ['a backend id with a policy prefix', edge({ backend: { backend_id: 'ipp_1' } }), '/routes/0/backend/backend_id'],
  ['a reference to a name that no document may have', edge({ backend: { backend_id: 'HTTPResponseBackend/a b' } }), '/routes/0/backend/backend_id'],
  ['a list reference to the wrong kind', edge({ ip_restriction: { ip_policy_ids: ['HTTPSEdge/web'] } }), '/routes/0/ip_restriction/ip_policy_ids/0'],
  ['a weighted backend keyed by a policy', { kind: 'WeightedBackend', name: 'w', backends: { 'IPPolicy/office': 1 } }, '/backends'],
  ['a User reference (users are not documents; give the usr_ id)', { kind: 'APIKey', name: 'k', owner_id: 'User/alice' }, '/owner_id'],
  ['a server-set module field', edge({ saml: { idp_metadata: '<EntityDescriptor/>', entity_id: 'x' } }), '/routes/0/saml'],
  ['terminate_at on an HTTPS edge (always edge, read-only)', { kind: 'HTTPSEdge', name: 'w', tls_termination: { terminate_at: 'edge' } }, '/tls_termination'],
  ['an unknown module', edge({ gzip: {} }), '/routes/0'],
  ['a module field of the wrong type', edge({ circuit_breaker: { num_buckets: 'ten' } }), '/routes/0/circuit_breaker'],
  ['a route without match_type', { kind: 'HTTPSEdge', name: 'w', routes: [{ match: '/' }] }, '/routes/0'],
  ['a missing required body field', { kind: 'CertificateAuthority', name: 'ca' }, ''],
  ['a PEM field holding something else', { kind: 'CertificateAuthority', name: 'ca', ca_pem: 'not a pem' }, '/ca_pem'],
  ['a malformed interpolation is no escape hatch', { kind: 'SSHCertificateAuthority', name: 's', private_key_type: '${vault:x}' }, '/private_key_type'],
];

describe('the manifest JSON Schema refuses', () => {
  it.each(mistakes)('%s', (_reason, doc, blamed) => {
    const problems = problemsOf(doc);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.some((p) => p.startsWith(`${blamed} `)), problems.join('\n')).toBe(true);
  });
});

/** The JSON Schema node at a field path from fieldPaths (`.` keys, `[]` items, `.*` map values), looking through nullable wrappers. */
function nodeAt(root: Json, path: string): Json {
  const objectBranch = (n: Json): Json => n.anyOf?.find((b: Json) => b.type === 'object' || b.type === 'array') ?? n;
  let node = root;
  for (const step of path.match(/[^.[\]]+|\[\]/g)!) {
    node = objectBranch(node);
    if (step === '[]') node = node.items;
    else if (step === '*') node = node.additionalProperties;
    else node = node.properties?.[step];
    if (!node) throw new Error(`no node at ${path} (step ${step})`);
  }
  return node;
}

const documentFields = (kind: string) => documentFieldPaths(manifestKind(kind)!);

describe.each(manifestKinds.map((k) => [k.kind] as const))('%s in the schema', (kind) => {
  const def = schema.$defs[kind];
  const fields = documentFields(kind).filter((f) => !f.traits.computed);

  it('is dispatched on by kind and closed to unknown keys', () => {
    expect(schema.allOf).toContainEqual({ if: { properties: { kind: { const: kind } }, required: ['kind'] }, then: { $ref: `#/$defs/${kind}` } });
    expect(def.additionalProperties).toBe(false);
    expect(def.properties.kind).toMatchObject({ const: kind });
    expect(def.required).toEqual(expect.arrayContaining(['kind', 'name']));
  });

  it('has every create-body field, and children nested without their parent field', () => {
    for (const f of fields.filter((x) => !x.path.includes('.') && !x.path.includes('['))) expect(def.properties, f.path).toHaveProperty([f.path]);
    for (const c of childSpecsOf(kind)) {
      const items = def.properties[c.key].items;
      expect(items.additionalProperties).toBe(false);
      expect(items.properties).not.toHaveProperty([c.parentField]);
      expect(items.required ?? []).not.toContain(c.parentField);
      expect(items.required).toContain(c.naturalKey);
    }
  });

  it('marks exactly the write-only fields as secrets', () => {
    const marked: string[] = [];
    const walk = (n: unknown, at: string) => {
      if (!n || typeof n !== 'object') return;
      if ((n as Json).writeOnly === true) marked.push(at);
      for (const [k, v] of Object.entries(n as Json)) walk(v, `${at}/${k}`);
    };
    walk(def, '');
    const secrets = fields.filter((f) => f.traits.writeOnly);
    expect(marked.length).toBe(secrets.length);
    for (const f of secrets) {
      const node = nodeAt(def, f.path);
      expect(node.writeOnly, f.path).toBe(true);
      expect(node.description, f.path).toMatch(/^.+ Secret: write-only/);
    }
  });

});

/** Every reference field of every manifest kind, children's included. */
const referenceFields = manifestKinds.flatMap((k) => documentFields(k.kind).filter((f) => f.traits.ref).map((f) => [k.kind, f.path, f.traits.ref!] as const));

describe('reference fields take Kind/name, raw ids and interpolations, and nothing else', () => {
  it('are found (the walk reaches modules and children)', () => {
    expect(referenceFields.map(([k, p]) => `${k}.${p}`)).toEqual(expect.arrayContaining(['HTTPSEdge.routes[].backend.backend_id', 'WeightedBackend.backends', 'APIKey.owner_id']));
  });

  it.each(referenceFields)('%s %s', (kind, path, ref) => {
    const node = nodeAt(schema.$defs[kind], path);
    const value = ref.inKeys ? node.propertyNames : node.type === 'array' ? node.items : node;
    expect(node.description).toMatch(/raw id of an existing/);
    const check = ajv.compile(value);
    for (const to of ref.to) {
      expect(check(`${findKind(to)!.prefix}_abc`), `${to} id`).toBe(true);
      // Only kinds a manifest can declare have names to refer to (users are read-only).
      expect(check(`${to}/some-name_1.x`), `${to}/name`).toBe(!!manifestKind(to));
    }
    expect(check('${env:ID}'), 'interpolation').toBe(true);
    const other = manifestKinds.find((k) => !ref.to.includes(k.kind))!;
    expect(check(`${other.kind}/x`), `${other.kind}/x`).toBe(false);
    expect(check(`${other.prefix}_abc`), `${other.prefix}_abc`).toBe(false);
    expect(check('x'), 'a bare name').toBe(false);
  });
});
