// The worst documents a client can put in a field that the server parses (traffic policies,
// SAML metadata, PEMs, DER, SSH keys) and in the JSON body itself: each is a 400 naming the
// field, every time, and the server stays up. Before the bounds, a route whose policy was
// JSON nested 1,000 deep ended in a V8 fatal error that took this test process down with
// the server (it runs in-process, so a crash fails the run rather than passing quietly).
// `edgeform validate` meets the same bounds through the catalog.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCUMENT_LIMITS } from '../../provider/catalog/validate/bounded-parse.js';
import { expectInvalid } from '../helpers/api.js';
import { manifestDir, runCli } from '../helpers/cli.js';
import { caPem, freshHostport, IDP_METADATA } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;

/** A YAML block mapping nested `n` levels by indentation. */
const blockNest = (n: number) => Array.from({ length: n }, (_, i) => `${' '.repeat(i)}a:`).join('\n') + ' 1\n';
/** YAML aliases that expand to 9^5 nodes from 45 aliases. */
const ALIAS_BOMB = ['a: &a [x, x, x, x, x, x, x, x, x]', ...['b', 'c', 'd', 'e'].map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcd'[i]}`).join(', ')}]`), `f: [${Array(9).fill('*e').join(', ')}]`].join('\n');
const BILLION_LAUGHS = `<?xml version="1.0"?>
<!DOCTYPE lolz [
  <!ENTITY lol "lol">
  ${Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${Array(10).fill(`&lol${i || ''};`).join('')}">`).join('\n  ')}
]>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">&lol9;</md:EntityDescriptor>`;

/** DER SEQUENCEs nested `n` deep around a NULL, in a CERTIFICATE PEM block. */
function deepDerPem(n: number): string {
  let der = Buffer.from([0x05, 0x00]);
  for (let i = 0; i < n; i++) {
    const len = der.length;
    const header = len < 128 ? [0x30, len] : len < 256 ? [0x30, 0x81, len] : [0x30, 0x82, len >> 8, len & 0xff];
    der = Buffer.concat([Buffer.from(header), der]);
  }
  const b64 = der.toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

/** A policy field value: JSON or YAML text. */
const POLICIES: Array<{ reason: string; value: string }> = [
  { reason: 'JSON nested 1,000 deep (the V8 fatal error)', value: `{"on_http_request":${'['.repeat(1000)}${']'.repeat(1000)}}` },
  { reason: 'JSON objects nested 5,000 deep', value: `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}` },
  { reason: 'YAML flow mappings nested 1,000 deep', value: `${'{a: '.repeat(1000)}1${'}'.repeat(1000)}` },
  { reason: 'YAML block mappings nested 300 deep by indentation', value: blockNest(300) },
  { reason: 'YAML block sequences nested 10,000 deep on one line', value: `${'- '.repeat(10000)}x\n` },
  { reason: 'YAML explicit keys nested 10,000 deep', value: `${'? '.repeat(10000)}x\n` },
  { reason: 'indentation and brackets together past the depth', value: `${blockNest(40).trimEnd().slice(0, -2)} ${'['.repeat(40)}${']'.repeat(40)}\n` },
  { reason: 'an alias bomb (9^5 nodes from 45 aliases)', value: ALIAS_BOMB },
  { reason: 'more aliases than allowed', value: `a: &a x\nb: [${Array(DOCUMENT_LIMITS.maxAliases + 1).fill('*a').join(', ')}]\n` },
];

/** A policy of one deny rule whose only expression is `expression`. */
const withExpression = (expression: string) => JSON.stringify({ on_http_request: [{ expressions: [expression], actions: [{ type: 'deny' }] }] });

/** CEL expressions past the bounds: the parser's depth limit did not count unary operators. */
const EXPRESSIONS: Array<{ reason: string; value: string }> = [
  { reason: 'an expression of 20,000 `!` (a stack overflow in the CEL parser)', value: withExpression(`${'!'.repeat(20000)}true`) },
  { reason: 'an expression of 20,000 unary minus', value: withExpression(`${'- '.repeat(20000)}1 == 1`) },
  { reason: 'an expression of 1,500 `!` (under the node limit, deep in the checker)', value: withExpression(`${'!'.repeat(1500)}true`) },
  { reason: 'an expression in parentheses 20,000 deep', value: withExpression(`${'('.repeat(20000)}true${')'.repeat(20000)}`) },
  { reason: 'an expression of 10,000 additions', value: withExpression(`req.method == "a"${' + "a"'.repeat(10000)}`) },
  { reason: 'an expression with a list of 20,000 elements', value: withExpression(`[${Array(20000).fill('1').join(',')}].size() > 0`) },
  { reason: 'three `all` over lists of 600 nested (216 million steps per request)', value: withExpression(Array.from({ length: 3 }, (_, i) => `[${Array.from({ length: 600 }, (_, j) => j).join(',')}].all(v${i}, `).join('') + 'true)))') },
  { reason: 'four `exists` over the request headers nested (100 million steps for 100 headers)', value: withExpression("req.headers.exists(a, req.headers.exists(b, req.headers.exists(c, req.headers.exists(d, a + b + c + d == ''))))") },
];

let s: TestServer;
let edgeId: string;
let routePath: string;
beforeAll(async () => {
  s = await startTestServer();
  edgeId = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id;
  const route = await s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: '/hostile' });
  routePath = `/edges/https/${edgeId}/routes/${route.body.id}`;
});
afterAll(async () => { await s.close(); });

let n = 0;
const route = (extra: Doc) => s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: `/r${++n}`, ...extra });

/** Each case: how to send it, and the field the 400 names. */
const CASES: Array<{ reason: string; send: () => Promise<any>; field: string }> = [
  ...POLICIES.map((p) => ({ reason: `route create: ${p.reason}`, send: () => route({ traffic_policy: { value: p.value } }), field: 'traffic_policy.value' })),
  ...POLICIES.map((p) => ({ reason: `module PUT: ${p.reason}`, send: () => s.put(`${routePath}/traffic_policy`, { value: p.value }), field: 'value' })),
  ...EXPRESSIONS.map((p) => ({ reason: `route create: ${p.reason}`, send: () => route({ traffic_policy: { value: p.value } }), field: 'traffic_policy.value' })),
  { reason: 'SAML metadata with a billion-laughs DTD', send: () => route({ saml: { idp_metadata: BILLION_LAUGHS } }), field: 'saml.idp_metadata' },
  { reason: 'SAML metadata with external entities', send: () => route({ saml: { idp_metadata: `<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>${IDP_METADATA.replace(/^<\?xml[^>]*>/, '')}` } }), field: 'saml.idp_metadata' },
  { reason: 'SAML metadata nested 5,000 elements deep', send: () => route({ saml: { idp_metadata: `<md:EntityDescriptor>${'<a>'.repeat(5000)}${'</a>'.repeat(5000)}</md:EntityDescriptor>` } }), field: 'saml.idp_metadata' },
  { reason: 'SAML metadata over 256 KiB', send: () => route({ saml: { idp_metadata: `<md:EntityDescriptor>${' '.repeat(262144)}</md:EntityDescriptor>` } }), field: 'saml.idp_metadata' },
  { reason: 'a CA PEM over 64 KiB', send: () => s.post('/certificate_authorities', { ca_pem: caPem() + 'x'.repeat(70000) }), field: 'ca_pem' },
  { reason: 'a CA PEM of 3,600 BEGIN lines without END (quadratic to a lazy regex)', send: () => s.post('/certificate_authorities', { ca_pem: '-----BEGIN CERTIFICATE-----\n'.repeat(3600) }), field: 'ca_pem' },
  { reason: 'a CA certificate of DER SEQUENCEs nested 10,000 deep', send: () => s.post('/certificate_authorities', { ca_pem: deepDerPem(10000) }), field: 'ca_pem' },
  { reason: 'a TLS certificate of deep DER and a key of deep DER', send: () => s.post('/tls_certificates', { certificate_pem: deepDerPem(3000), private_key_pem: deepDerPem(3000).replace(/CERTIFICATE/g, 'PRIVATE KEY') }), field: 'certificate_pem' },
  { reason: 'an SSH public key over 16 KiB', send: async () => s.post('/ssh_user_certificates', { ssh_certificate_authority_id: (await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' })).body.id, public_key: `ssh-ed25519 ${'A'.repeat(17000)}` }), field: 'public_key' },
  { reason: 'an SSH public key whose wire lengths lie', send: async () => s.post('/ssh_user_certificates', { ssh_certificate_authority_id: (await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' })).body.id, public_key: `ssh-rsa ${Buffer.from([0xff, 0xff, 0xff, 0xff, 0x41]).toString('base64')}` }), field: 'public_key' },
  { reason: 'a body nested 500,000 deep in metadata (1 MiB of brackets)', send: () => s.post('/ip_policies', undefined, { raw: `{"metadata":${'['.repeat(500000)}${']'.repeat(500000)}}` }), field: 'metadata' },
  { reason: 'a body nested deep inside a map', send: () => s.post('/backends/tunnel_group', undefined, { raw: `{"labels":{"a":${'{"b":'.repeat(10000)}1${'}'.repeat(10000)}}}` }), field: 'labels' },
  { reason: 'a body nested deep inside a module', send: () => route({ compression: JSON.parse(`${'{"enabled":'.repeat(100)}true${'}'.repeat(100)}`) }), field: 'compression' },
  { reason: 'a body nested deep where an id goes (echoed in errors)', send: () => s.post(`/edges/https/${edgeId}/routes`, undefined, { raw: `{"edge_id":${'['.repeat(100000)}${']'.repeat(100000)}}` }), field: 'edge_id' },
];

describe('documents and bodies past the bounds', () => {
  it.each(CASES)('$reason: 400 naming $field, three times in a row', async ({ send, field }) => {
    for (let i = 0; i < 3; i++) expectInvalid(await send(), field);
  }, 60_000);

  it('the server is still up and working after all of them', async () => {
    const r = await s.post('/ip_policies', { description: 'still here' });
    expect(r.status, r.text).toBe(201);
    expect((await s.get(`/ip_policies/${r.body.id}`)).body.description).toBe('still here');
    expect(s.logs.filter((l) => JSON.parse(l).status >= 500)).toEqual([]);
  });

  it('a policy at the bounds is accepted: 64 levels, 100 aliases', async () => {
    const rule = '{"actions":[{"type":"deny","config":{"a":' + '['.repeat(DOCUMENT_LIMITS.maxDepth - 7) + ']'.repeat(DOCUMENT_LIMITS.maxDepth - 7) + '}}]}';
    const deep = await route({ traffic_policy: { value: `{"on_http_request":[${rule}]}` } });
    // Parsed whole: refused only later, by the deny action's own config rules (no field "a"),
    // which no bounds check could have reached.
    expect(deep.status, deep.text).toBe(400);
    expect(deep.body.details.policy_path).toBe('on_http_request[0].actions[0].config.a');
    expect(deep.body.details.reason).toContain('unknown deny field "a"');
    const aliases = `on_http_request:\n  - actions: [&a {type: deny}, ${Array(DOCUMENT_LIMITS.maxAliases).fill('*a').join(', ')}]\n`;
    const r = await route({ traffic_policy: { value: aliases } });
    expect(r.status, r.text).toBe(201);
  });
});

describe('edgeform validate meets the same bounds', () => {
  it.each(EXPRESSIONS.slice(0, 3))('$reason: reported on the expression, exit 1, no crash', async ({ value }) => {
    const yaml = `kind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    traffic_policy:\n      value: ${JSON.stringify(value)}\n`;
    const r = await runCli(['validate', '-f', manifestDir({ 'stack.yaml': yaml })]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/routes\[0\]\.traffic_policy\.value\.on_http_request\[0\]\.expressions\[0\]: .*column 1: more than 50 unary operators in a row/);
  });

  it.each(POLICIES.slice(0, 4).concat(POLICIES.slice(7)))('$reason: reported on the field, exit 1, no crash', async ({ value }) => {
    const yaml = `kind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    traffic_policy:\n      value: ${JSON.stringify(value)}\n`;
    const r = await runCli(['validate', '-f', manifestDir({ 'stack.yaml': yaml })]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/routes\[0\]\.traffic_policy\.value: .*(nested more than 64|aliases)/);
  });
});
