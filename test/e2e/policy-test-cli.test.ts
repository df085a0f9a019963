// `edgeform policy test` as a user runs it, a real process: what each rule and action did,
// the response or "forwarded upstream", the --repeat summary on the fake clock, --json, and
// a policy with typos refused with file:line problems as `edgeform validate` gives them.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { TYPO_POLICY } from '../helpers/policies.js';

const POLICY = `on_http_request:
  - name: limit per key
    expressions: ["req.path.startsWith('/api')"]
    actions:
      - type: rate-limit
        config:
          name: per-key
          algorithm: sliding_window
          capacity: 5
          rate: 60s
          bucket_key: ["getReqHeader('X-Api-Key')"]
  - name: tag
    expressions: ["!actions.service.rate_limit.limited"]
    actions:
      - type: add-headers
        config: {headers: {x-bucket: edgeform}}
  - name: office only
    expressions: ["req.path == '/admin'"]
    actions:
      - type: restrict-ips
        config: {allow: [198.51.100.0/24]}
`;

/** `matches` with a pattern a backtracking engine takes exponential time on, and one in RE2's own syntax. */
const REDOS_POLICY = `on_http_request:
  - name: probe
    expressions: ["getReqHeader('X-Probe').exists(h, h.matches('^(a|aa)+$'))"]
    actions: [{type: deny}]
  - name: case-insensitive
    expressions: ["req.method.matches('(?i)^get$')"]
    actions: [{type: add-headers, config: {headers: {x-re2: yes}}}]
  - name: rewrite
    actions: [{type: url-rewrite, config: {from: '^https://[^/]+/(a|aa)+$', to: /x}}]
  - name: redirect
    actions: [{type: redirect, config: {from: '^https://[^/]+/(a|aa)+$', to: /y}}]
`;

const dir = manifestDir({ 'policy.yaml': POLICY, 'typo.yaml': TYPO_POLICY, 'redos.yaml': REDOS_POLICY });
const file = (name: string) => path.join(dir, name);

const edgeform = (...args: string[]) => runCliProcess(['policy', 'test', ...args], {}, { timeoutMs: 60_000 });

describe('edgeform policy test', async () => {
  it('says which rules matched, what each action did, and that the request is forwarded upstream', async () => {
    const r = await edgeform(file('policy.yaml'), '--request', 'GET https://app.example.com/api?x=1', '-H', 'X-Api-Key: k1', '--client-ip', '203.0.113.7');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('GET https://app.example.com/api?x=1 from 203.0.113.7');
    expect(r.stdout).toContain('rule 0 (limit per key): matched\n    rate-limit per-key: bucket "k1" under capacity 5 per 60s; continues');
    expect(r.stdout).toContain('rule 1 (tag): matched\n    add-headers: x-bucket: edgeform');
    expect(r.stdout).toContain('rule 2 (office only): not matched');
    expect(r.stdout).toContain('upstream request: set x-bucket: edgeform');
    expect(r.stdout).toContain('Result: forwarded upstream');
  });

  it('with --repeat and --interval, limits on the fake clock and sums up', async () => {
    const r = await edgeform(file('policy.yaml'), '--request', 'GET https://app.example.com/api', '-H', 'X-Api-Key: k1', '--repeat', '8', '--interval', '500ms');
    expect(r.code, r.stderr).toBe(0);
    // The 6th request, 2.5 s after the first, waits until the first leaves the window: 57.5 s, 58 in whole seconds.
    expect(r.stdout).toContain('#6 at 2.5s: 429 (retry-after: 58s)');
    expect(r.stdout).toContain('8 requests: 5 forwarded, 3 limited (first retry-after: 58s)');
  });

  it('ends a request the policy answers with its response', async () => {
    const r = await edgeform(file('policy.yaml'), '--request', 'GET http://app.example.com/admin', '--client-ip', '203.0.113.7');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('restrict-ips: 203.0.113.7 outside the allow list; refused');
    expect(r.stdout).toContain('Result: response 403');
    expect((await edgeform(file('policy.yaml'), '--request', 'GET http://app.example.com/admin', '--client-ip', '198.51.100.9')).stdout).toContain('Result: forwarded upstream');
  });

  it('--json gives every request, each phase and the summary', async () => {
    const r = await edgeform(file('policy.yaml'), '--request', 'GET https://app.example.com/api', '-H', 'X-Api-Key: k2', '--repeat', '7', '--json');
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.valid).toBe(true);
    // All at once: at exactly 60 s the first window still weighs in full, so the first whole second that fits is 61.
    expect(doc.summary).toEqual({ requests: 7, forwarded: 5, limited: 2, other: 0, first_retry_after: 61 });
    expect(doc.requests[5]).toMatchObject({ n: 6, result: 'response', response: { status: 429, headers: { 'retry-after': '61' } } });
    expect(doc.requests[0].phases.on_http_request.rules[0]).toMatchObject({ index: 0, name: 'limit per key', matched: true });
  });

  it('refuses a policy with typos with file:line problems, as validate does', async () => {
    const r = await edgeform(file('typo.yaml'), '--request', 'GET https://app.example.com/');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const f = file('typo.yaml');
    expect(r.stderr).toContain(`${f}:4: on_http_request[0] (limit) expressions[0] column 5: unknown variable req.pth`);
    expect(r.stderr).toContain(`${f}:6: on_http_request[0].actions[0].type: unknown action type "rate-limt" (did you mean rate-limit?); supported types: rate-limit, deny, custom-response, add-headers, remove-headers, redirect, url-rewrite, restrict-ips, basic-auth, circuit-breaker, close-connection, compress-response, forward-internal, http-request, jwt-validation, log, request-body-find-replace, response-body-find-replace, set-vars, sse-find-replace, verify-webhook, oauth, openid-connect, owasp-crs-request, owasp-crs-response, saml, terminate-tls`);
    expect(r.stderr).toContain(`${f}:19: on_http_request[1].actions[0].config.capacity: capacity 0 is out of range 1..2,000,000,000`);
    expect(r.stderr).toContain('3 problems found.');
  });

  it('matches() runs on RE2: a catastrophic pattern against a 20,000-character header answers (it ran for ever on JavaScript\'s RegExp), and RE2 syntax such as (?i) works', async () => {
    const r = await edgeform(file('redos.yaml'), '--request', 'GET https://app.example.com/', '-H', `X-Probe: ${'a'.repeat(20000)}!`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('rule 0 (probe): not matched');
    expect(r.stdout).toContain('rule 1 (case-insensitive): matched\n    add-headers: x-re2: yes');
  });

  it('url-rewrite and redirect `from` run on RE2: the same pattern against a 20,000-character path answers', async () => {
    const r = await edgeform(file('redos.yaml'), '--request', `GET https://app.example.com/${'a'.repeat(20000)}!`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/rule 2 \(rewrite\): matched\n    url-rewrite: \S+ does not match from; unchanged/);
    expect(r.stdout).toMatch(/rule 3 \(redirect\): matched\n    redirect: \S+ does not match from; continues/);
  });

  it.each([
    [['--request', 'FETCH'], /--request must be 'METHOD URL'/],
    [['--request', 'GET https://a.example.com/', '-H', 'no colon'], /-H must be 'Name: value'/],
    [['--repeat', '0'], /--repeat/],
    [['--interval', 'soon'], /--interval/],
  ])('a usage error exits 2: %j', async (args, says) => {
    const r = await edgeform(file('policy.yaml'), ...args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(says);
  });

  it('refuses an HTTP policy without --request, naming the flag, instead of "forwarded upstream" having run nothing', async () => {
    const r = await edgeform(file('policy.yaml'));
    expect(r.code).toBe(2);
    expect(r.stdout).not.toContain('forwarded upstream');
    expect(r.stderr).toContain("the policy has on_http_request rules, which run on a request: give one with --request 'METHOD URL'");
  });

  it('documents its flags in --help', async () => {
    const r = await edgeform('--help');
    expect(r.code).toBe(0);
    for (const flag of ['--request', '-H, --header', '--client-ip', '--repeat', '--interval', '--json']) expect(r.stdout).toContain(flag);
  });
});
