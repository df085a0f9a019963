// manifestsFromSynth: synthesized CDKTF stacks (cdktf's own synth of the generated
// bindings, and hand-written cdk.tf.json for what CDKTF writes rarely) into reconciler
// manifest documents, and what it refuses with a problem instead of guessing.
import { Fn, TerraformStack, TerraformVariable, Testing } from 'cdktf';
import { describe, expect, it } from 'vitest';
import { kindOf } from '../../provider/catalog/index.js';
import { manifestsFromSynth } from '../../provider/cdktf/from-synth.js';
import {
  apiKey, botUser, eventDestination, eventSubscription, HttpsEdgeWithRoutes, IpPolicyWithRules, tlsCertificate, tunnelGroupBackend, weightedBackend,
} from '../../provider/cdktf/index.js';
import { EdgeStack } from '../../examples/cdktf/main.js';
import { childSpecsOf } from '../../reconciler/manifest/kinds.js';

process.env.CHECKPOINT_DISABLE = '1';

type Doc = Record<string, any>;
const DIR = '/stacks/edge';

function synthOf(build: (stack: TerraformStack) => void): Doc {
  const app = Testing.app();
  const stack = new TerraformStack(app, 'test');
  build(stack);
  return JSON.parse(Testing.synth(stack));
}

/** Replaces `Kind/name` references with ids of that kind, so the catalog's create schema can judge the body. */
function withIds(value: unknown): unknown {
  if (typeof value === 'string') {
    const m = /^([A-Z][A-Za-z]+)\/(.+)$/.exec(value);
    return m ? `${kindOf(m[1]).prefix}_${m[2]}` : value;
  }
  if (Array.isArray(value)) return value.map(withIds);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [withIds(k) as string, withIds(v)]));
  return value;
}

/** Every document (and each nested child) is a valid create body of its kind once references are ids. */
function expectCreateBodies(documents: Doc[]) {
  for (const { kind, name, prevent_destroy: _, ...body } of documents) {
    const children = childSpecsOf(kind);
    // A bot user's document name is its body's name too.
    const own = { ...('name' in kindOf(kind).fields ? { name } : {}), ...Object.fromEntries(Object.entries(body).filter(([k]) => !children.some((c) => c.key === k))) };
    const r = kindOf(kind).create.safeParse(withIds(own));
    expect(r.success, `${kind}/${name}: ${JSON.stringify(r.error?.issues)}`).toBe(true);
    for (const c of children) {
      for (const child of (body[c.key] ?? []) as Doc[]) {
        // A parent named in the body (a rule's policy) must be there; one in the path (a route's edge) must not.
        const parent = c.entry.parent!.in === 'body' ? { [c.parentField]: `${kindOf(kind).prefix}_parent` } : {};
        const rc = c.entry.create.safeParse(withIds({ ...child, ...parent }));
        expect(rc.success, `${c.entry.kind} in ${kind}/${name}: ${JSON.stringify(rc.error?.issues)}`).toBe(true);
      }
    }
  }
}

describe('manifestsFromSynth', () => {
  it('turns the example stack into documents: rules and routes nest in their parent, references become Kind/name', () => {
    const app = Testing.app();
    const stack = new EdgeStack(app, 'edge', { hostname: 'shop.example.com' });
    const json = JSON.parse(Testing.synth(stack));
    const { documents, problems } = manifestsFromSynth(json, DIR);
    expect(problems).toEqual([]);
    const policy = Object.keys(json.resource.edgeform_ip_policy)[0];
    const edge = Object.keys(json.resource.edgeform_https_edge)[0];
    const byKind = Object.fromEntries(documents.map((d) => [d.kind, d]));
    expect(documents.map((d) => d.kind).sort()).toEqual(['HTTPResponseBackend', 'HTTPSEdge', 'IPPolicy']);
    expect(byKind.IPPolicy).toEqual({
      kind: 'IPPolicy', name: policy, description: 'office networks',
      rules: expect.arrayContaining([
        { cidr: '203.0.113.0/24', action: 'allow' }, { cidr: '2001:db8::/48', action: 'allow' }, { cidr: '203.0.113.66', action: 'deny' },
      ]),
    });
    expect(byKind.IPPolicy.rules).toHaveLength(3);
    expect(byKind.HTTPResponseBackend).toEqual({
      kind: 'HTTPResponseBackend', name: 'maintenance', body: 'down for maintenance', headers: { 'Retry-After': '120' }, status_code: 503,
    });
    const { routes, ...web } = byKind.HTTPSEdge;
    expect(web).toEqual({ kind: 'HTTPSEdge', name: edge, description: 'public site', hostports: ['shop.example.com:443'], tls_termination: { min_version: '1.3' } });
    expect(routes.sort((a: Doc, b: Doc) => a.match.localeCompare(b.match))).toEqual([
      { match_type: 'path_prefix', match: '/', backend: { backend_id: 'HTTPResponseBackend/maintenance' }, compression: {} },
      {
        match_type: 'path_prefix', match: '/admin', backend: { backend_id: 'HTTPResponseBackend/maintenance' },
        ip_restriction: { ip_policy_ids: [`IPPolicy/${policy}`] }, response_headers: { add: { 'Cache-Control': 'no-store' } },
      },
    ]);
    expectCreateBodies(documents);
  });

  it('converts references in map keys, lists of blocks, variables, files and prevent_destroy', () => {
    const json = synthOf((stack) => {
      const key = new TerraformVariable(stack, 'tls_key', { type: 'string', sensitive: true });
      const bot = new botUser.BotUser(stack, 'ci', { name: 'ci-bot' });
      new apiKey.ApiKey(stack, 'ci_key', { ownerId: bot.id, description: 'for CI' });
      const a = new tunnelGroupBackend.TunnelGroupBackend(stack, 'a', { labels: { env: 'prod' } });
      const b = new tunnelGroupBackend.TunnelGroupBackend(stack, 'b', { labels: { env: 'canary' }, lifecycle: { preventDestroy: true } });
      new weightedBackend.WeightedBackend(stack, 'split', { backends: { [a.id]: 90, [b.id]: 10 } });
      const log = new eventDestination.EventDestination(stack, 'log', { target: { log: {} } });
      new eventSubscription.EventSubscription(stack, 'audit', { destinationIds: [log.id], sources: [{ type: 'ip_policy_created.v0' }, { type: 'ip_policy_deleted.v0' }] });
      new tlsCertificate.TlsCertificate(stack, 'web', { certificatePem: Fn.file('certs/web.pem'), privateKeyPem: key.stringValue, description: `key from ${key.stringValue}` });
      new IpPolicyWithRules(stack, 'office', { allow: ['10.0.0.0/8'] });
      new HttpsEdgeWithRoutes(stack, 'api', { hostports: ['api.example.com:443'], routes: { all: { matchType: 'path_prefix', match: '/', backend: { backendId: 'bkdtg_existing' } } } });
    });
    const { problems, ...out } = manifestsFromSynth(json, DIR);
    const documents = out.documents as Doc[];
    expect(problems).toEqual([]);
    const doc = (kind: string, name: string) => documents.find((d) => d.kind === kind && d.name === name);
    // A bot user's own name names its document (a document's name and the body's cannot disagree).
    expect(doc('BotUser', 'ci-bot')).toEqual({ kind: 'BotUser', name: 'ci-bot' });
    expect(doc('APIKey', 'ci_key')).toEqual({ kind: 'APIKey', name: 'ci_key', owner_id: 'BotUser/ci-bot', description: 'for CI' });
    expect(doc('TunnelGroupBackend', 'b')).toEqual({ kind: 'TunnelGroupBackend', name: 'b', labels: { env: 'canary' }, prevent_destroy: true });
    expect(doc('WeightedBackend', 'split')).toEqual({ kind: 'WeightedBackend', name: 'split', backends: { 'TunnelGroupBackend/a': 90, 'TunnelGroupBackend/b': 10 } });
    expect(doc('EventSubscription', 'audit')).toEqual({
      kind: 'EventSubscription', name: 'audit', destination_ids: ['EventDestination/log'], sources: [{ type: 'ip_policy_created.v0' }, { type: 'ip_policy_deleted.v0' }],
    });
    expect(doc('TLSCertificate', 'web')).toEqual({
      kind: 'TLSCertificate', name: 'web', certificate_pem: '${file:/stacks/edge/certs/web.pem}', private_key_pem: '${env:TF_VAR_tls_key}', description: 'key from ${env:TF_VAR_tls_key}',
    });
    // A raw id stays an id.
    expect(documents.find((d) => d.kind === 'HTTPSEdge')!.routes[0].backend).toEqual({ backend_id: 'bkdtg_existing' });
    expect(documents).toHaveLength(10);
    expectCreateBodies(documents.filter((d) => d.kind !== 'TLSCertificate'));
  });

  it('takes a block written as a one-element list, as Terraform JSON allows', () => {
    const { documents, problems } = manifestsFromSynth({
      resource: { edgeform_https_edge: { web: { hostports: ['a.example.com:443'], tls_termination: [{ min_version: '1.2' }], description: null } } },
    }, DIR);
    expect(problems).toEqual([]);
    expect(documents).toEqual([{ kind: 'HTTPSEdge', name: 'web', hostports: ['a.example.com:443'], tls_termination: { min_version: '1.2' } }]);
  });

  const policy = { description: 'p' };
  const rule = (extra: Doc) => ({ cidr: '10.0.0.0/8', action: 'allow', ip_policy_id: '${edgeform_ip_policy.p.id}', ...extra });
  const problemCases: { why: string; json: unknown; problem: RegExp }[] = [
    { why: 'not an object', json: [], problem: /cdk\.tf\.json: expected a JSON object/ },
    { why: 'another provider cannot be deployed without terraform', json: { resource: { aws_s3_bucket: { b: {} } } }, problem: /resource\.aws_s3_bucket: belongs to another provider/ },
    { why: 'an edgeform type that does not exist', json: { resource: { edgeform_nothing: { n: {} } } }, problem: /edgeform_nothing: is not an edgeform resource type/ },
    { why: 'data sources need terraform', json: { data: { http: { x: {} } }, resource: {} }, problem: /data: data blocks cannot be evaluated/ },
    { why: 'modules need terraform', json: { module: { m: { source: './m' } } }, problem: /module: module blocks/ },
    { why: 'an unknown argument', json: { resource: { edgeform_ip_policy: { p: { colour: 'red' } } } }, problem: /edgeform_ip_policy\.p\.colour: is not an argument/ },
    { why: 'a computed attribute set', json: { resource: { edgeform_ip_policy: { p: { uri: 'x' } } } }, problem: /p\.uri: is set by the server/ },
    { why: 'count', json: { resource: { edgeform_ip_policy: { p: { count: 2 } } } }, problem: /p\.count: count has no manifest equivalent/ },
    { why: 'a provider alias', json: { resource: { edgeform_ip_policy: { p: { provider: 'edgeform.other' } } } }, problem: /p\.provider: provider aliases/ },
    { why: 'ignore_changes changes what a plan shows', json: { resource: { edgeform_ip_policy: { p: { lifecycle: { ignore_changes: ['description'] } } } } }, problem: /p\.lifecycle\.ignore_changes: has no manifest equivalent/ },
    { why: 'a name a document cannot carry', json: { resource: { edgeform_ip_policy: { _p: policy } } }, problem: /edgeform_ip_policy\._p: "_p" cannot name a manifest document/ },
    { why: 'a bot user whose name is known only at apply cannot name its document', json: { variable: { n: {} }, resource: { edgeform_bot_user: { b: { name: '${var.n}' } } } }, problem: /b\.name: must be a literal string: it names the manifest document/ },
    { why: 'two bot users with one name', json: { resource: { edgeform_bot_user: { a: { name: 'ci' }, b: { name: 'ci' } } } }, problem: /edgeform_bot_user\.b: a second BotUser named "ci"/ },
    {
      why: 'a reference to an attribute other than id', json: { resource: { edgeform_ip_policy: { p: policy }, edgeform_tcp_edge: { t: { ip_restriction: { ip_policy_ids: ['${edgeform_ip_policy.p.uri}'] } } } } },
      problem: /t\.ip_restriction\.ip_policy_ids\[0\]: refers to edgeform_ip_policy\.p\.uri; a manifest can refer to a resource only by its id/,
    },
    {
      why: 'a reference to a resource the stack lacks', json: { resource: { edgeform_tcp_edge: { t: { backend: { backend_id: '${edgeform_tunnel_group_backend.gone.id}' } } } } },
      problem: /t\.backend\.backend_id: refers to edgeform_tunnel_group_backend\.gone, which the stack does not declare/,
    },
    {
      why: 'an id where the API takes no reference is known only after apply', json: { resource: { edgeform_ip_policy: { p: policy, q: { description: '${edgeform_ip_policy.p.id}' } } } },
      problem: /q\.description: refers to edgeform_ip_policy\.p\.id where the API takes no reference/,
    },
    {
      why: 'a reference inside a longer string', json: { resource: { edgeform_ip_policy: { p: policy, q: { description: 'after ${edgeform_ip_policy.p.id}' } } } },
      problem: /q\.description: \$\{edgeform_ip_policy\.p\.id\} inside a longer string/,
    },
    { why: 'a function call', json: { resource: { edgeform_ip_policy: { p: { description: '${upper("x")}' } } } }, problem: /p\.description: \$\{upper\("x"\)\} cannot be evaluated without Terraform/ },
    { why: 'a template directive', json: { resource: { edgeform_ip_policy: { p: { description: '%{if true}x%{endif}' } } } }, problem: /p\.description: template directives/ },
    { why: 'an undeclared variable', json: { resource: { edgeform_ip_policy: { p: { description: '${var.nope}' } } } }, problem: /p\.description: refers to var\.nope, which the stack does not declare/ },
    { why: 'a literal ${ would be interpolated by the reconciler', json: { resource: { edgeform_ip_policy: { p: { description: 'cost $${x}' } } } }, problem: /p\.description: a literal \$\{/ },
    {
      why: 'a rule whose policy is a raw id cannot nest in a document', json: { resource: { edgeform_ip_policy_rule: { r: rule({ ip_policy_id: 'ipp_123' }) } } },
      problem: /edgeform_ip_policy_rule\.r\.ip_policy_id: must be \$\{edgeform_ip_policy\.<name>\.id\} for a IPPolicy of this stack/,
    },
    {
      why: 'a route whose edge the stack lacks', json: { resource: { edgeform_https_edge_route: { r: { edge_id: '${edgeform_https_edge.gone.id}', match_type: 'exact_path', match: '/' } } } },
      problem: /edgeform_https_edge_route\.r\.edge_id: must be \$\{edgeform_https_edge\.<name>\.id\}/,
    },
    {
      why: 'prevent_destroy on a child', json: { resource: { edgeform_ip_policy: { p: policy }, edgeform_ip_policy_rule: { r: rule({ lifecycle: { prevent_destroy: true } }) } } },
      problem: /r\.lifecycle\.prevent_destroy: applies to whole documents; set it on the IPPolicy/,
    },
    {
      why: 'a reference to a child, which has no name in a manifest',
      json: { resource: { edgeform_ip_policy: { p: policy }, edgeform_ip_policy_rule: { r: rule({}) }, edgeform_tcp_edge: { t: { ip_restriction: { ip_policy_ids: ['${edgeform_ip_policy_rule.r.id}'] } } } } },
      problem: /refers to edgeform_ip_policy_rule\.r, a IPPolicyRule, which manifests nest in its parent/,
    },
    { why: 'two blocks where one goes', json: { resource: { edgeform_https_edge: { w: { tls_termination: [{}, {}] } } } }, problem: /w\.tls_termination: takes one block/ },
  ];

  for (const c of problemCases) {
    it(`reports a problem: ${c.why}`, () => {
      const { problems } = manifestsFromSynth(c.json, DIR);
      expect(problems.some((p) => c.problem.test(p) && p.startsWith(`${DIR}/cdk.tf.json: `)), problems.join('\n')).toBe(true);
    });
  }

  it('ignores what changes nothing: outputs, the provider block, depends_on, create_before_destroy, metadata', () => {
    const { documents, problems } = manifestsFromSynth({
      '//': { metadata: {} },
      terraform: { required_providers: {} },
      provider: { edgeform: [{}] },
      output: { id: { value: '${edgeform_ip_policy.p.id}' } },
      data: {},
      resource: { edgeform_ip_policy: { p: { '//': { metadata: { path: 'x' } }, depends_on: ['edgeform_ip_policy.q'], lifecycle: { create_before_destroy: true }, description: 'p' } } },
    }, DIR);
    expect(problems).toEqual([]);
    expect(documents).toEqual([{ kind: 'IPPolicy', name: 'p', description: 'p' }]);
  });
});
