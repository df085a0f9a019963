// The service's language on the engine, beyond its documented examples: string-and-object
// variables, interpolation's compile-time problems and run-time failures, the geography
// refusal, actions.ngrok beside actions.service, an action that waits, and the open registry.
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { registerAction } from '../../provider/catalog/validate/policy/actions/index.js';
import { defineAction, HTTP_PHASES } from '../../provider/catalog/validate/policy/actions/define.js';
import { compilePolicy, evaluate, isCompiled, PolicyState, type CompiledPolicy, type PolicyInput, type PolicyResult } from '../../server/policy/index.js';
import { registerRunner } from '../../server/policy/actions/index.js';

const compile = (doc: Record<string, unknown>): CompiledPolicy => {
  const c = compilePolicy(stringify(doc));
  if (!isCompiled(c)) throw new Error(JSON.stringify(c.problems));
  return c;
};
const problems = (doc: Record<string, unknown>) => {
  const c = compilePolicy(stringify(doc));
  return isCompiled(c) ? [] : c.problems;
};
const req = (url = 'https://u:p@app.example.com:8443/a/b?x=1&x=2', headers: Record<string, string> = {}): PolicyInput => ({
  now: 0,
  conn: { client_ip: '203.0.113.7', server_port: 8443, client_port: 50123, tls_version: '1.3', tls: { version: '1.3', sni: 'app.example.com', negotiated_alpn: 'h2', cipher_suite: 'TLS_AES_128_GCM_SHA256' } },
  req: { method: 'post', url, headers },
});
const matches = (expr: string, input = req()) => evaluate(compile({ on_http_request: [{ expressions: [expr], actions: [{ type: 'deny' }] }] }), 'on_http_request', input, new PolicyState()).rules[0];

describe('variables', () => {
  it('req.url compares as the whole URL and has its parts; req.path and req.query still work', () => {
    for (const e of [
      "req.url == 'https://u:p@app.example.com:8443/a/b?x=1&x=2'",
      "req.url.path == '/a/b' && req.path == '/a/b'",
      "req.url.host == 'app.example.com' && req.url.port == 8443 && req.url.scheme == 'https'",
      "req.url.authority == 'u:p@app.example.com:8443'.split('@')[1] && req.url.user_password == 'u:p'",
      "req.url.query == 'x=1&x=2' && req.url.query_params['x'] == ['1', '2'] && req.query['x'] == ['1', '2']",
      "req.url.uri == '/a/b?x=1&x=2' && req.method == 'POST'",
      "req.url.startsWith('https://') && size(req.url) > 10",
    ]) expect(matches(e), e).toMatchObject({ matched: true });
  });

  it('the user agent, content type and cookies, parsed', () => {
    const input = req('https://app.example.com/', {
      'user-agent': 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15',
      'content-type': 'text/html; charset=utf-8',
      cookie: 'a=1; b=2; a=3',
    });
    for (const e of [
      "req.user_agent.name == 'Safari' && req.user_agent.version == '17.1' && req.user_agent.os == 'macOS' && req.user_agent.is_desktop && !req.user_agent.is_bot",
      "req.user_agent.contains('Macintosh')",
      "req.content_type == 'text/html' && req.content_type.parameters['charset'] == 'utf-8' && req.content_type.raw == 'text/html; charset=utf-8'",
      "req.cookies['a'].map(c, c.value) == ['1', '3'] && req.cookies['b'][0].name == 'b'",
    ]) expect(matches(e, input), e).toMatchObject({ matched: true });
    expect(matches('req.user_agent.is_bot', req('https://app.example.com/', { 'user-agent': 'Googlebot/2.1 (+http://www.google.com/bot.html)' }))).toMatchObject({ matched: true });
  });

  it('conn.*, conn.tls.* and endpoint.*', () => {
    expect(matches("conn.client_port == 50123 && conn.tls.sni == 'app.example.com' && conn.tls.negotiated_alpn == 'h2' && conn.tls.cipher_suite == 'TLS_AES_128_GCM_SHA256' && conn.tls.version == '1.3'")).toMatchObject({ matched: true });
    expect(matches("conn.tls.client.subject == '' && conn.tls.client.san.dns_names == [] && conn.client_ip == '203.0.113.7'")).toMatchObject({ matched: true });
    expect(matches("endpoint.host == 'app.example.com' && endpoint.port == 8443 && endpoint.url == 'https://app.example.com:8443' && endpoint.protocol == 'https'")).toMatchObject({ matched: true });
  });

  it('geography and IP intelligence are refused naming the setting; an unknown field of req.url is an unknown variable', () => {
    expect(problems({ on_http_request: [{ expressions: ["conn.geo.country_code == 'US'"], actions: [{ type: 'deny' }] }] })[0].message).toMatch(/column 6: conn\.geo needs a MaxMind-format geography or IP-intelligence database, which this server has not been given \(--geoip-db PATH, EDGEFORM_GEOIP_DB\)/);
    expect(problems({ on_http_request: [{ expressions: ["'com.openai.gptbot' in conn.client_ip.categories"], actions: [{ type: 'deny' }] }] })[0].message).toMatch(/conn\.client_ip\.categories needs a MaxMind-format/);
    expect(problems({ on_http_request: [{ expressions: ["req.url.pth == '/'"], actions: [{ type: 'deny' }] }] })[0].message).toMatch(/column 9: unknown variable req\.url\.pth in on_http_request/);
  });

  it('actions.ngrok.* is actions.service.*', () => {
    const p = compile({ on_http_request: [
      { actions: [{ type: 'add-headers', config: { headers: { 'x-a': '1' } } }] },
      { expressions: ["actions.ngrok.add_headers.headers_added == actions.service.add_headers.headers_added && actions.ngrok.add_headers.headers_added['x-a'] == '1'"], actions: [{ type: 'deny', config: { status_code: 418 } }] },
    ] });
    expect(evaluate(p, 'on_http_request', req(), new PolicyState()).outcome).toMatchObject({ response: { status: 418 } });
  });
});

describe('interpolation', () => {
  it('is type-checked when compiled: the field and the column in the string', () => {
    const ps = problems({ on_http_request: [{ actions: [{ type: 'add-headers', config: { headers: { 'x-a': 'ip ${conn.client_ipp}', 'x-b': '${1 +}', 'x-c': 'open ${req.method' } } }] }] });
    expect(ps).toEqual([
      { path: 'on_http_request[0].actions[0].config.headers.x-a', message: 'on_http_request[0].actions[0].config.headers.x-a column 11: unknown variable conn.client_ipp in on_http_request (see docs/traffic-policy.md for the variables)' },
      { path: 'on_http_request[0].actions[0].config.headers.x-b', message: expect.stringMatching(/^on_http_request\[0\]\.actions\[0\]\.config\.headers\.x-b column \d+: /) },
      { path: 'on_http_request[0].actions[0].config.headers.x-c', message: 'on_http_request[0].actions[0].config.headers.x-c column 6: "${" is not closed by "}"' },
    ]);
  });

  it('writes values as text; braces and quotes inside an interpolation are its own', () => {
    const p = compile({ on_http_request: [{ actions: [{ type: 'custom-response', config: { status_code: 200, body: "${req.method}|${1 + 2}|${true}|${['a', 'b']}|${{'k': 'v'}['k']}|${json.encode({'a': 1})}|${'}'}" } }] }] });
    expect(evaluate(p, 'on_http_request', req(), new PolicyState()).outcome).toMatchObject({ response: { body: 'POST|3|true|["a","b"]|v|{"a":1}|}' } });
  });

  it('one that fails on a request makes its action do nothing, saying why; the rule goes on', () => {
    const p = compile({ on_http_request: [{ actions: [
      { type: 'add-headers', config: { headers: { 'x-key': "${req.headers['x-api-key'][0]}" } } },
      { type: 'add-headers', config: { headers: { 'x-after': 'yes' } } },
    ] }] });
    const r = evaluate(p, 'on_http_request', req(), new PolicyState());
    expect(r.rules[0].actions[0].did).toMatch(/^add-headers: failed: /);
    expect(r.mutations.request.set_headers).toEqual({ 'x-after': 'yes' });
  });
});

describe('bounds', () => {
  it('functions that make data refuse sizes past their bound: replace, lists.range, format', () => {
    const big = 'a'.repeat(5000);
    const input = req('https://app.example.com/', { 'x-big': big });
    expect(matches("req.headers['x-big'][0].replace('', req.headers['x-big'][0]).size() > 0", input).error).toMatch(/replace would make more than 1,000,000 characters/);
    expect(matches("req.headers['x-big'][0].replace('a', 'bb').size() == 10000", input)).toMatchObject({ matched: true });
    expect(matches('lists.range(100001).size() > 0').error).toMatch(/lists\.range takes 0 to 100000/);
  });
});

describe('actions that wait, and the open registry', () => {
  it('a phase with an action that waits resumes after it, with later rules, and keeps their trace', async () => {
    registerAction(defineAction<{ ms: number }>({ type: 'test-wait', phases: HTTP_PHASES, fields: ['ms'], check: (c) => ({ ms: Number(c.config.ms ?? 1) }) }));
    registerRunner('test-wait', (config: { ms: number }) => (ctx) => ({
      did: 'test-wait: waiting',
      pending: new Promise((resolve) => setTimeout(() => resolve({ did: `test-wait: waited ${config.ms} ms at ${ctx.phase}` }), config.ms)),
    }));
    const p = compile({ on_http_request: [
      { actions: [{ type: 'test-wait', config: { ms: 5 } }, { type: 'add-headers', config: { headers: { 'x-a': '1' } } }] },
      { expressions: ["actions.ngrok.add_headers.headers_added['x-a'] == '1'"], actions: [{ type: 'deny', config: { status_code: 409 } }] },
    ] });
    const first = evaluate(p, 'on_http_request', req(), new PolicyState());
    expect(first.pending).toBeDefined();
    const r: PolicyResult = await first.pending!;
    expect(r.outcome).toMatchObject({ response: { status: 409 } });
    expect(r.rules.map((x) => x.actions.map((a) => a.did))).toEqual([['test-wait: waited 5 ms at on_http_request', 'add-headers: x-a: 1'], ['deny: 409']]);
  });
});
