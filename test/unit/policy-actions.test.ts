// Every action's config rules: what is accepted, each way a config is refused (with the path
// and the words), the phases each action runs in, and types nobody supports.
import { describe, expect, it } from 'vitest';
import { Re2Pattern } from '../../provider/catalog/validate/regex.js';
import { compileTrafficPolicy } from '../../provider/catalog/validate/traffic-policy.js';

type Doc = Record<string, unknown>;
const one = (type: string, config?: Doc, phase = 'on_http_request') => JSON.stringify({ [phase]: [{ actions: [{ type, ...(config === undefined ? {} : { config }) }] }] });
const AT = 'on_http_request[0].actions[0]';

function problems(type: string, config?: Doc, phase?: string) {
  const r = compileTrafficPolicy(one(type, config, phase));
  return r.ok ? [] : r.issues;
}

function compiled(type: string, config?: Doc, phase = 'on_http_request') {
  const r = compileTrafficPolicy(one(type, config, phase));
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.compiled[phase as 'on_http_request']![0].actions[0].config;
}

describe('action configs', () => {
  it.each([
    // deny
    { type: 'deny', config: { status_code: 200 }, path: `${AT}.config.status_code`, says: /must be an integer from 400 to 599/ },
    { type: 'deny', config: { status_code: '403' }, path: `${AT}.config.status_code` },
    { type: 'deny', config: { status: 403 }, path: `${AT}.config.status`, says: /unknown deny field "status"; fields are status_code/ },
    // custom-response
    { type: 'custom-response', config: {}, path: `${AT}.config.status_code`, says: /status_code is required/ },
    { type: 'custom-response', config: { status_code: 700 }, path: `${AT}.config.status_code` },
    { type: 'custom-response', config: { status_code: 200, body: 5 }, path: `${AT}.config.body`, says: /body must be a string/ },
    { type: 'custom-response', config: { status_code: 200, headers: ['x'] }, path: `${AT}.config.headers`, says: /map of header names/ },
    { type: 'custom-response', config: { status_code: 200, headers: { 'bad name': 'x' } }, path: `${AT}.config.headers.bad name`, says: /not a valid HTTP header name/ },
    { type: 'custom-response', config: { status_code: 200, headers: { 'x-a': 'a\r\nb' } }, path: `${AT}.config.headers.x-a`, says: /CR or LF/ },
    // add-headers
    { type: 'add-headers', config: {}, path: `${AT}.config.headers`, says: /headers is required/ },
    { type: 'add-headers', config: { headers: {} }, path: `${AT}.config.headers`, says: /at least one header/ },
    { type: 'add-headers', config: { headers: { 'x-a': 1 } }, path: `${AT}.config.headers.x-a`, says: /must be a string/ },
    // remove-headers
    { type: 'remove-headers', config: { headers: [] }, path: `${AT}.config.headers`, says: /non-empty list/ },
    { type: 'remove-headers', config: { headers: 'server' }, path: `${AT}.config.headers` },
    { type: 'remove-headers', config: { headers: ['ok', 'not ok'] }, path: `${AT}.config.headers[1]` },
    // redirect
    { type: 'redirect', config: {}, path: `${AT}.config.to`, says: /to is required/ },
    { type: 'redirect', config: { to: 'https://x', status_code: 200 }, path: `${AT}.config.status_code`, says: /one of 301, 302, 303, 307, 308/ },
    { type: 'redirect', config: { to: 'https://x', from: '(?=a)' }, path: `${AT}.config.from`, says: /not a valid RE2 pattern: lookahead/ },
    // url-rewrite
    { type: 'url-rewrite', config: { to: '/x' }, path: `${AT}.config.from`, says: /from is required/ },
    { type: 'url-rewrite', config: { from: '[', to: '/x' }, path: `${AT}.config.from` },
    // restrict-ips
    { type: 'restrict-ips', config: {}, path: `${AT}.config`, says: /at least one CIDR/ },
    { type: 'restrict-ips', config: { allow: ['10.0.0.1/8'] }, path: `${AT}.config.allow[0]`, says: /host bits set; did you mean 10\.0\.0\.0\/8/ },
    { type: 'restrict-ips', config: { deny: 'x' }, path: `${AT}.config.deny`, says: /list of CIDRs/ },
    { type: 'restrict-ips', config: { allow: ['10.0.0.0/8'], enforce: 'yes' }, path: `${AT}.config.enforce` },
    // rate-limit (the rest is in traffic-policy.test.ts)
    { type: 'rate-limit', config: { name: 'x', algorithm: 'sliding_window', capacity: 0, rate: '60s', bucket_key: ['req.host'] }, path: `${AT}.config.capacity`, says: /^capacity 0 is out of range 1\.\.2,000,000,000$/ },
    { type: 'rate-limit', config: { name: 'x', algorithm: 'sliding_window', rate: '60s', bucket_key: ['req.host'] }, path: `${AT}.config.capacity`, says: /^capacity is required: an integer in 1\.\.2,000,000,000$/ },
    // types
    { type: 'rate-limt', config: {}, path: `${AT}.type`, says: /^unknown action type "rate-limt" \(did you mean rate-limit\?\); supported types: rate-limit, deny, custom-response, add-headers, remove-headers, redirect, url-rewrite, restrict-ips, forward-internal$/ },
    { type: 'log', config: {}, path: `${AT}.type`, says: /^unknown action type "log"; supported types: / },
  ])('$type $config: a problem at $path', ({ type, config, path, says }) => {
    const found = problems(type, config);
    expect(found.map((p) => p.path)).toContain(path);
    if (says) expect(found.find((p) => p.path === path)!.message).toMatch(says);
  });

  it('fills in the defaults and types each config', () => {
    expect(compiled('deny')).toEqual({ status_code: 403 });
    expect(compiled('deny', { status_code: 451 })).toEqual({ status_code: 451 });
    expect(compiled('custom-response', { status_code: 503 })).toEqual({ status_code: 503, headers: {}, body: '' });
    expect(compiled('remove-headers', { headers: ['Server'] })).toEqual({ headers: ['server'] });
    expect(compiled('redirect', { to: 'https://x.example.com/' })).toEqual({ to: 'https://x.example.com/', status_code: 302, headers: {} });
    expect(compiled('restrict-ips', { deny: ['2001:DB8::/32'] })).toEqual({ enforce: true, allow: [], deny: ['2001:db8::/32'] });
    const rewrite = compiled('url-rewrite', { from: '(?i)^/OLD/(?P<rest>.*)', to: '/new/$<rest>' }) as { from: Re2Pattern; to: string };
    expect(rewrite.from.source).toBe('(?i)^/OLD/(?P<rest>.*)');
    expect(rewrite.from.replace('/old/a/b', rewrite.to)).toBe('/new/a/b');
  });

  it.each([
    ['rate-limit', { name: 'x', algorithm: 'sliding_window', capacity: 1, rate: '60s', bucket_key: ['req.host'] }],
    ['custom-response', { status_code: 200 }],
    ['add-headers', { headers: { a: 'b' } }],
    ['remove-headers', { headers: ['a'] }],
    ['redirect', { to: '/x' }],
    ['url-rewrite', { from: 'a', to: 'b' }],
  ])('%s is an HTTP action: refused in on_tcp_connect, naming its phases', (type, config) => {
    expect(problems(type, config, 'on_tcp_connect')).toEqual([{ path: 'on_tcp_connect[0].actions[0].type', message: expect.stringMatching(new RegExp(`^${type} runs only in on_http_request`)) }]);
  });

  it('url-rewrite runs only in on_http_request; deny and restrict-ips run in every phase', () => {
    expect(problems('url-rewrite', { from: 'a', to: 'b' }, 'on_http_response')[0].message).toBe('url-rewrite runs only in on_http_request, not in on_http_response');
    for (const phase of ['on_http_request', 'on_http_response', 'on_tcp_connect']) {
      expect(problems('deny', undefined, phase)).toEqual([]);
      expect(problems('restrict-ips', { allow: ['0.0.0.0/0'] }, phase)).toEqual([]);
    }
  });
});

describe('expressions', () => {
  const rule = (expressions: string[], phase = 'on_http_request', name?: string) =>
    compileTrafficPolicy(JSON.stringify({ [phase]: [{ ...(name ? { name } : {}), expressions, actions: [{ type: 'deny' }] }] }));

  it.each([
    ["req.method == 'GET' && req.path.startsWith('/api')"],
    ["'x-api-key' in req.headers && req.headers['x-api-key'][0] == 'k'"],
    ["getReqHeader('X-Api-Key').size() > 0"],
    ["req.query['page'][0] == '2' || req.content_length > 1024"],
    ["conn.client_ip.startsWith('10.') && conn.server_port == 443 && conn.tls.version == '1.3'"],
    ["time.now > timestamp('2026-01-01T00:00:00Z')"],
    ['actions.service.rate_limit.limited || actions.service.restrict_ips.action == "deny"'],
    ["req.host.matches('^(www\\\\.)?example\\\\.com$')"],
  ])('accepts %s', (e) => expect(rule([e])).toMatchObject({ ok: true }));

  it('type-checks in the response phase with res.* and getResHeader', () => {
    expect(rule(['res.status_code >= 500', "getResHeader('Content-Type')[0] == 'text/html'"], 'on_http_response')).toMatchObject({ ok: true });
  });

  it.each([
    { e: "req.mthod == 'GET'", column: 5, says: /unknown variable req\.mthod in on_http_request/ },
    { e: "request.method == 'GET'", column: 1, says: /unknown variable request in on_http_request/ },
    { e: 'res.status_code == 200', column: 1, says: /unknown variable res in on_http_request/ },
    { e: 'req.method == 1', column: 1, says: /no such overload: string == int/ },
    { e: "req.path.startsWith('/a') &&", column: 29, says: /Unexpected token/ },
    { e: 'req.path', column: 1, says: /must give a bool; this one gives string/ },
    { e: "lookup('x')", column: 1, says: /no matching overload for 'lookup\(string\)'/ },
    // A literal matches() pattern is compiled with the policy: RE2 syntax and program size, at the pattern's column.
    { e: "req.url.matches('(x|y|z|a){1000}q')", column: 17, says: /compiles to \d+ RE2 instructions, over the 2000 allowed/ },
    { e: "req.host == 'x' || req.url.matches('a(?=b)')", column: 36, says: /invalid RE2 pattern "a\(\?=b\)"/ },
  ])('refuses $e with its rule, name and column', ({ e, column, says }) => {
    const r = rule(["req.method == 'GET'", e], 'on_http_request', 'api only');
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues).toHaveLength(1);
    expect(r.issues[0].path).toBe('on_http_request[0].expressions[1]');
    expect(r.issues[0].message).toMatch(new RegExp(`^on_http_request\\[0\\] \\(api only\\) expressions\\[1\\] column ${column}: `));
    expect(r.issues[0].message).toMatch(says);
  });

  it('on_tcp_connect has the connection only', () => {
    expect(rule(["conn.client_ip == '192.0.2.7'"], 'on_tcp_connect')).toMatchObject({ ok: true });
    const r = rule(["req.host == 'x'"], 'on_tcp_connect');
    expect(r.ok ? '' : r.issues[0].message).toMatch(/unknown variable req in on_tcp_connect/);
  });
});

describe('a from pattern runs on RE2 and replaces as String.prototype.replace does', () => {
  it.each([
    ['^/old/(.*)$', '/new/$1', '/old/a/b'],
    ['^/(?P<first>[^/]+)/(?P<rest>.*)$', '/$<rest>/$<first>/$<none>', '/a/b/c'],
    ['b', '[$&|$`|$\'|$$|$1|$<x>]', 'abc'],
    ['(a)(b)?', '$2-$1-$10-$01', 'ac'],
    ['(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)', '$10|$11|$1', 'abcdefghij'],
    ['x', 'y', 'abc'],
  ])('%s with %s on %s', (pattern, to, text) => {
    const js = new RegExp(pattern.replace(/\(\?P</g, '(?<'));
    expect(new Re2Pattern(pattern).replace(text, to)).toBe(text.replace(js, to));
  });

  it('takes RE2 syntax RegExp refuses ((?i) in the middle), and a pattern RegExp backtracks on for ever answers (the text is 30,000 characters)', () => {
    expect(new Re2Pattern('/(?i)OLD').replace('/old', '/new')).toBe('/new');
    expect(new Re2Pattern('^/(a|aa)+$').replace(`/${'a'.repeat(30000)}!`, '/x')).toBe(`/${'a'.repeat(30000)}!`);
  });
});
