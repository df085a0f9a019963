// The engine: compilePolicy then evaluate, per phase, on plain inputs with a fake clock.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { compilePolicy, evaluate, isCompiled, PolicyState, type CompiledPolicy, type PolicyInput } from '../../server/policy/index.js';

function compile(doc: Record<string, unknown>, scope?: string): CompiledPolicy {
  const c = compilePolicy(stringify(doc), { scope });
  if (!isCompiled(c)) throw new Error(JSON.stringify(c.problems));
  return c;
}

const limit = (capacity: number, bucket_key: string[] = ['conn.client_ip'], name = 'per-client') => ({ type: 'rate-limit', config: { name, algorithm: 'sliding_window', capacity, rate: '60s', bucket_key } });

const request = (over: Partial<PolicyInput> & { headers?: Record<string, string>; url?: string; ip?: string } = {}): PolicyInput => ({
  now: over.now ?? 1_000_000,
  conn: { client_ip: over.ip ?? '203.0.113.7', server_port: 443, tls_version: '1.3' },
  req: { method: 'GET', url: over.url ?? 'https://app.example.com/api/items?page=2&page=3', headers: over.headers ?? { 'X-Api-Key': 'k1' } },
});

describe('rate-limit with enforce: false', () => {
  it('lets an over-capacity request through and only reports it; enforce must be a boolean', () => {
    const dry = compile({ on_http_request: [{ actions: [{ ...limit(1), config: { ...limit(1).config, enforce: false } }] }] });
    const state = new PolicyState();
    expect(evaluate(dry, 'on_http_request', request({ now: 0 }), state).outcome).toBe('continue');
    const second = evaluate(dry, 'on_http_request', request({ now: 1000 }), state);
    expect(second.outcome).toBe('continue');
    expect(second.actions.service.rate_limit.limited).toBe(true);
    expect(second.rules[0].actions[0].did).toMatch(/over capacity 1 per 60s; not enforced \(enforce: false\), continues/);
    const enforced = compile({ on_http_request: [{ actions: [{ ...limit(1), config: { ...limit(1).config, enforce: true } }] }] });
    const s2 = new PolicyState();
    evaluate(enforced, 'on_http_request', request({ now: 0 }), s2);
    expect(evaluate(enforced, 'on_http_request', request({ now: 1000 }), s2).outcome).not.toBe('continue');
    const bad = compilePolicy(stringify({ on_http_request: [{ actions: [{ ...limit(1), config: { ...limit(1).config, enforce: 'no' } }] }] }));
    expect(isCompiled(bad)).toBe(false);
    expect(JSON.stringify((bad as { problems: unknown }).problems)).toContain('enforce \\"no\\" must be true or false');
  });
});

describe('rate-limit in a policy', () => {
  const policy = compile({
    on_http_request: [
      { name: 'limit', actions: [limit(2, ["getReqHeader('X-Api-Key')", 'req.host'])] },
      { name: 'after', expressions: ['actions.service.rate_limit.limited == false'], actions: [{ type: 'add-headers', config: { headers: { 'x-bucket': 'ok' } } }] },
    ],
  });

  it('leaves actions.service.rate_limit.* for later rules, and ends the request with 429 and retry-after when over capacity', () => {
    const state = new PolicyState();
    const first = evaluate(policy, 'on_http_request', request({ now: 0 }), state);
    expect(first.outcome).toBe('continue');
    expect(first.actions.service.rate_limit).toEqual({ bucket_key: 'k1,app.example.com', limited: false, error: { code: '', message: '' } });
    expect(first.rules.map((r) => [r.name, r.matched])).toEqual([['limit', true], ['after', true]]);
    expect(first.mutations.request.set_headers).toEqual({ 'x-bucket': 'ok' });
    evaluate(policy, 'on_http_request', request({ now: 10_000 }), state);
    const third = evaluate(policy, 'on_http_request', request({ now: 20_000 }), state);
    // The first request leaves the window at 60 s; at 60 s exactly the window still counts it in full, so 61 s - 20 s.
    expect(third.outcome).toEqual({ response: { status: 429, headers: { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '41' }, body: 'Too Many Requests\n' } });
    // A client that waits exactly that long is let through.
    expect(evaluate(policy, 'on_http_request', request({ now: 61_000 }), state).outcome).toBe('continue');
    expect(third.actions.service.rate_limit).toMatchObject({ bucket_key: 'k1,app.example.com', limited: true });
    // Later rules do not run.
    expect(third.rules.map((r) => r.name)).toEqual(['limit']);
    expect(third.mutations.request.set_headers).toEqual({});
  });

  it('counts buckets apart: another key, another host, another policy scope', () => {
    const state = new PolicyState();
    for (let i = 0; i < 2; i++) evaluate(policy, 'on_http_request', request({ now: i }), state);
    expect(evaluate(policy, 'on_http_request', request({ now: 5 }), state).outcome).not.toBe('continue');
    expect(evaluate(policy, 'on_http_request', request({ now: 5, headers: { 'x-api-key': 'k2' } }), state).outcome).toBe('continue');
    expect(evaluate(policy, 'on_http_request', request({ now: 5, url: 'https://other.example.com/' }), state).outcome).toBe('continue');
    const other = compile({ on_http_request: [{ name: 'limit', actions: [limit(2, ["getReqHeader('X-Api-Key')", 'req.host'])] }] }, 'route-2');
    expect(evaluate(other, 'on_http_request', request({ now: 5 }), state).outcome).toBe('continue');
    expect(state.stats()).toEqual({ buckets: 4, evictions: 0, expired: 0 });
  });

  it('each ingress server counts on its own (one PolicyState each)', () => {
    const a = new PolicyState();
    const b = new PolicyState();
    for (let i = 0; i < 2; i++) evaluate(policy, 'on_http_request', request({ now: i }), a);
    expect(evaluate(policy, 'on_http_request', request({ now: 3 }), a).outcome).not.toBe('continue');
    expect(evaluate(policy, 'on_http_request', request({ now: 3 }), b).outcome).toBe('continue');
  });

  it('keeps the variables across phases: on_http_response reads what on_http_request left', () => {
    const both = compile({
      on_http_request: [{ actions: [limit(1)] }],
      on_http_response: [{ expressions: ['actions.service.rate_limit.limited'], actions: [{ type: 'add-headers', config: { headers: { 'x-limited': '1' } } }] }],
    });
    const state = new PolicyState();
    evaluate(both, 'on_http_request', request({ now: 0 }), state);
    const req = evaluate(both, 'on_http_request', request({ now: 1 }), state);
    const res = evaluate(both, 'on_http_response', { ...request({ now: 1 }), res: { status_code: 429, headers: {} }, actions: req.actions }, state);
    expect(res.mutations.response.set_headers).toEqual({ 'x-limited': '1' });
  });
});

describe('the other actions', () => {
  const state = new PolicyState();
  const run = (actions: unknown[], input: PolicyInput = request(), phase: 'on_http_request' | 'on_http_response' | 'on_tcp_connect' = 'on_http_request') =>
    evaluate(compile({ [phase]: [{ actions }] }), phase, input, state);

  it('deny answers its status, or closes a TCP connection', () => {
    expect(run([{ type: 'deny' }]).outcome).toMatchObject({ response: { status: 403 } });
    expect(run([{ type: 'deny', config: { status_code: 451 } }]).outcome).toMatchObject({ response: { status: 451 } });
    expect(run([{ type: 'deny' }], { conn: { client_ip: '192.0.2.7', server_port: 22 } }, 'on_tcp_connect').outcome).toBe('close');
  });

  it('custom-response answers with its status, headers and body', () => {
    expect(run([{ type: 'custom-response', config: { status_code: 503, headers: { 'Retry-After': '120' }, body: 'down for maintenance' } }]).outcome).toEqual({
      response: { status: 503, headers: { 'retry-after': '120' }, body: 'down for maintenance' },
    });
  });

  it('add-headers and remove-headers change the request, and later expressions see it', () => {
    const r = evaluate(
      compile({
        on_http_request: [
          { actions: [{ type: 'add-headers', config: { headers: { 'X-Team': 'payments' } } }, { type: 'remove-headers', config: { headers: ['X-Api-Key'] } }] },
          { expressions: ["getReqHeader('x-team') == ['payments'] && !('x-api-key' in req.headers)"], actions: [{ type: 'custom-response', config: { status_code: 200, body: 'seen' } }] },
        ],
      }),
      'on_http_request',
      request(),
      state,
    );
    expect(r.outcome).toMatchObject({ response: { body: 'seen' } });
    expect(r.mutations.request).toEqual({ set_headers: { 'x-team': 'payments' }, remove_headers: ['x-api-key'] });
    expect(r.actions.service.add_headers.headers_added).toEqual({ 'x-team': 'payments' });
    expect(r.actions.service.remove_headers.headers_removed).toEqual(['x-api-key']);
  });

  it('in on_http_response they change the response', () => {
    const r = run([{ type: 'remove-headers', config: { headers: ['Server'] } }, { type: 'add-headers', config: { headers: { 'x-frame-options': 'DENY' } } }], { ...request(), res: { status_code: 200, headers: { Server: 'x' } } }, 'on_http_response');
    expect(r.outcome).toBe('continue');
    expect(r.mutations.response).toEqual({ set_headers: { 'x-frame-options': 'DENY' }, remove_headers: ['server'] });
    expect(r.mutations.request).toEqual({ set_headers: {}, remove_headers: [] });
  });

  it('redirect answers with location, from a pattern with groups, or goes on when it does not match', () => {
    expect(run([{ type: 'redirect', config: { to: 'https://www.example.com/' } }]).outcome).toEqual({ response: { status: 302, headers: { location: 'https://www.example.com/' }, body: '' } });
    const r = run([{ type: 'redirect', config: { from: '^https://app\\.example\\.com/api/(.*)$', to: 'https://api.example.com/$1', status_code: 308 } }]);
    expect(r.outcome).toMatchObject({ response: { status: 308, headers: { location: 'https://api.example.com/items?page=2&page=3' } } });
    expect(run([{ type: 'redirect', config: { from: '^http://', to: 'https://x/' } }]).outcome).toBe('continue');
  });

  it('url-rewrite changes the URL sent upstream, and what later rules read', () => {
    const r = evaluate(
      compile({
        on_http_request: [
          { actions: [{ type: 'url-rewrite', config: { from: '/api/(?P<rest>.*)$', to: '/v2/$<rest>' } }] },
          { expressions: ["req.path == '/v2/items' && req.query['page'] == ['2', '3']"], actions: [{ type: 'add-headers', config: { headers: { 'x-rewritten': '1' } } }] },
        ],
      }),
      'on_http_request',
      request(),
      state,
    );
    expect(r.mutations.request).toEqual({ set_headers: { 'x-rewritten': '1' }, remove_headers: [], url: 'https://app.example.com/v2/items?page=2&page=3' });
    expect(r.actions.service.url_rewrite.url).toBe('https://app.example.com/v2/items?page=2&page=3');
  });

  it('restrict-ips refuses by deny or outside allow, and with enforce: false only tells', () => {
    const cfg = { allow: ['203.0.113.0/24', '2001:db8::/32'], deny: ['203.0.113.66/32'] };
    expect(run([{ type: 'restrict-ips', config: cfg }]).outcome).toBe('continue');
    expect(run([{ type: 'restrict-ips', config: cfg }], request({ ip: '203.0.113.66' })).outcome).toMatchObject({ response: { status: 403 } });
    expect(run([{ type: 'restrict-ips', config: cfg }], request({ ip: '198.51.100.1' })).outcome).toMatchObject({ response: { status: 403 } });
    expect(run([{ type: 'restrict-ips', config: cfg }], request({ ip: '2001:db8::5' })).actions.service.restrict_ips).toEqual({ action: 'allow', matched_cidr: '2001:db8::/32', error: { code: '', message: '' } });
    expect(run([{ type: 'restrict-ips', config: cfg }], request({ ip: '::ffff:203.0.113.9' })).outcome).toBe('continue');
    const soft = run([{ type: 'restrict-ips', config: { ...cfg, enforce: false } }], request({ ip: '198.51.100.1' }));
    expect(soft.outcome).toBe('continue');
    expect(soft.actions.service.restrict_ips).toEqual({ action: 'deny', matched_cidr: '', error: { code: '', message: '' } });
    expect(run([{ type: 'restrict-ips', config: cfg }], { conn: { client_ip: '198.51.100.1', server_port: 22 } }, 'on_tcp_connect').outcome).toBe('close');
  });
});

describe('rules', () => {
  it('run when every expression is true (none: always); an expression that fails at run time counts as false, and says why', () => {
    const policy = compile({
      on_http_request: [
        { name: 'missing header', expressions: ["req.headers['x-none'][0] == 'a'"], actions: [{ type: 'deny' }] },
        { name: 'one false', expressions: ["req.method == 'GET'", "req.host == 'other.example.com'"], actions: [{ type: 'deny' }] },
        { name: 'time', expressions: ["time.now == timestamp('1970-01-01T00:16:40Z')"], actions: [{ type: 'add-headers', config: { headers: { 'x-at': 't' } } }] },
        { name: 'always', actions: [{ type: 'add-headers', config: { headers: { 'x-always': '1' } } }] },
      ],
    });
    const r = evaluate(policy, 'on_http_request', request(), new PolicyState());
    expect(r.outcome).toBe('continue');
    expect(r.rules.map((x) => [x.name, x.matched])).toEqual([['missing header', false], ['one false', false], ['time', true], ['always', true]]);
    expect(r.rules[0].error).toMatch(/req\.headers\['x-none'\]\[0\] == 'a': No such key: x-none/);
    expect(r.mutations.request.set_headers).toEqual({ 'x-at': 't', 'x-always': '1' });
  });

  it('a phase the policy does not have lets everything through', () => {
    const r = evaluate(compile({ on_tcp_connect: [{ actions: [{ type: 'deny' }] }] }), 'on_http_request', request(), new PolicyState());
    expect(r).toMatchObject({ outcome: 'continue', rules: [] });
  });

  it('compilePolicy gives problems, not a policy, for a document with errors', () => {
    expect(compilePolicy('on_http_request: [{actions: [{type: rate-limt}]}]')).toEqual({ problems: [expect.objectContaining({ path: 'on_http_request[0].actions[0].type' })] });
  });
});

describe('matches() patterns', () => {
  const policy = compile({ on_http_request: [{ name: 'by header', expressions: ["req.url.matches(getReqHeader('X-Pattern')[0])"], actions: [{ type: 'deny' }] }] });

  it('a pattern over 1024 characters (RE2 compiles in time linear in it) is an error of the expression, the rule does not match', () => {
    const r = evaluate(policy, 'on_http_request', request({ headers: { 'X-Pattern': 'a{1000}'.repeat(200) } }), new PolicyState());
    expect(r.outcome).toBe('continue');
    expect(r.rules[0].matched).toBe(false);
    expect(r.rules[0].error).toMatch(/at most 1024 characters; this one has 1400/);
  });

  it('a pattern from the request that compiles to over 2,000 RE2 instructions is an error of the expression', () => {
    const r = evaluate(policy, 'on_http_request', request({ headers: { 'X-Pattern': '(x|y|z|a){1000}q' } }), new PolicyState());
    expect(r.outcome).toBe('continue');
    expect(r.rules[0].error).toMatch(/compiles to \d+ RE2 instructions, over the 2000 allowed/);
  });

  it('a pattern the API accepts, against an 8 KiB header: over the evaluation\'s matches budget, an error of the expression at once (it held the loop 1.5 s)', async () => {
    const costly = compile({ on_http_request: [
      { name: 'costly', expressions: ["getReqHeader('X-Long')[0].matches('(?i)(a{30}){30}b')"], actions: [{ type: 'deny' }] },
      { name: 'later', expressions: ["req.url.matches('^https:')"], actions: [{ type: 'custom-response', config: { status_code: 200, body: 'later' } }] },
    ] });
    const h = monitorEventLoopDelay({ resolution: 10 });
    h.enable();
    const r = evaluate(costly, 'on_http_request', request({ headers: { 'X-Long': `${'a'.repeat(8192)}!b` } }), new PolicyState());
    await new Promise((res) => setTimeout(res, 30));
    h.disable();
    expect(r.rules[0].matched).toBe(false);
    expect(r.rules[0].error).toMatch(/this matches\(\) call would take the evaluation's matches\(\) calls over 100,000 units of pattern size times input length/);
    // The refused call was not run; a later one that fits in what is left runs as usual.
    expect(r.rules[1].error).toBeUndefined();
    expect(r.outcome).toMatchObject({ response: { body: 'later' } });
    // `|| true` does not hide it: the expression is an error all the same.
    const hidden = compile({ on_http_request: [{ name: 'or', expressions: ["getReqHeader('X-Long')[0].matches('(?i)(a{30}){30}b') || true"], actions: [{ type: 'deny' }] }] });
    const o = evaluate(hidden, 'on_http_request', request({ headers: { 'X-Long': `${'a'.repeat(8192)}!b` } }), new PolicyState());
    expect(o.rules[0].error).toMatch(/would take the evaluation's matches\(\) calls over/);
    expect(o.outcome).toBe('continue');
    // A correctness bound (nothing ran long on the loop), not a speed figure.
    expect(h.max / 1e6).toBeLessThan(200);
  });

  it('a pattern of 1024 characters is compiled and matched', () => {
    const r = evaluate(policy, 'on_http_request', request({ headers: { 'X-Pattern': `^https:/${'.?'.repeat(508)}` } }), new PolicyState());
    expect(r.rules[0].error).toBeUndefined();
    expect(r.outcome).not.toBe('continue');
  });
});

describe('the variables, made on first read', () => {
  const run = (rules: unknown[], input: PolicyInput) => evaluate(compile({ on_http_request: rules }), 'on_http_request', input, new PolicyState());
  const seen = { type: 'custom-response', config: { status_code: 200, body: 'seen' } };

  it('a header is found whatever the case of its names, in a few headers or in many, by getReqHeader, req.headers and a rate-limit key', () => {
    const rules = [
      { actions: [limit(1, ["req.headers['x-api-key']"], 'by-key')] },
      { expressions: ["getReqHeader('X-API-KEY') == ['k1', 'k2'] && req.headers['x-api-key'] == ['k1', 'k2'] && actions.service.rate_limit.bucket_key == 'k1,k2'"], actions: [seen] },
    ];
    const few = { 'X-Api-Key': 'k1', 'x-api-key': 'k2' };
    const many = { ...few, ...Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-Other-${i}`, 'v'])) };
    for (const headers of [few, many]) expect(run(rules, request({ headers })).outcome).toMatchObject({ response: { body: 'seen' } });
  });

  it('the host of a URL with a query or fragment before any path is the host', () => {
    const r = run([{ expressions: ["req.host == 'app.example.com' && req.path == '/' && req.query['x/y'] == ['']"], actions: [seen] }], request({ url: 'https://app.example.com?x/y' }));
    expect(r.outcome).toMatchObject({ response: { body: 'seen' } });
  });

  it('url-rewrite after a rule has read the path and query: later rules read the new ones', () => {
    const r = run(
      [
        { expressions: ["req.path == '/api/items' && req.query['page'] == ['2', '3'] && req.host == 'app.example.com'"], actions: [{ type: 'url-rewrite', config: { from: '/api/items\\?page=2&page=3$', to: '/v2/list?n=1' } }] },
        { expressions: ["req.path == '/v2/list' && req.query == {'n': ['1']} && req.host == 'app.example.com' && req.url.endsWith('/v2/list?n=1')"], actions: [seen] },
      ],
      request(),
    );
    expect(r.rules[0].matched).toBe(true);
    expect(r.outcome).toMatchObject({ response: { body: 'seen' } });
  });

  it("a phase's action variables are its own: the response phase's actions leave the request phase's result as it was", () => {
    const both = compile({
      on_http_request: [{ actions: [{ type: 'add-headers', config: { headers: { 'x-a': '1' } } }] }],
      on_http_response: [{ expressions: ["actions.service.add_headers.headers_added == {'x-a': '1'}"], actions: [{ type: 'add-headers', config: { headers: { 'x-b': '2' } } }] }],
    });
    const state = new PolicyState();
    const req = evaluate(both, 'on_http_request', request(), state);
    const res = evaluate(both, 'on_http_response', { ...request(), res: { status_code: 200, headers: {} }, actions: req.actions }, state);
    expect(res.rules[0].matched).toBe(true);
    expect(res.actions.service.add_headers.headers_added).toEqual({ 'x-b': '2' });
    expect(req.actions.service.add_headers.headers_added).toEqual({ 'x-a': '1' });
    // A fresh evaluation starts from the zero values again.
    expect(evaluate(compile({ on_http_request: [] }), 'on_http_request', request(), state).actions.service.add_headers.headers_added).toEqual({});
  });
});

describe('the macro budget', () => {
  // Nested macros over the request's headers iterate the square of their count, which the client chooses.
  const policy = compile({
    on_http_request: [
      { name: 'nested', expressions: ["req.headers.all(k, req.headers.all(j, j != ''))"], actions: [{ type: 'deny' }] },
      // CEL lets one true element decide `exists` despite errors in others; over the budget it is still an error.
      { name: 'decided elsewhere', expressions: ["req.headers.exists(k, k == 'h-1999' || !req.headers.all(j, j != 'none'))"], actions: [{ type: 'deny' }] },
      { name: 'no macro', expressions: ["req.method == 'GET'"], actions: [{ type: 'add-headers', config: { headers: { 'x-ran': '1' } } }] },
    ],
  });
  const headers = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`h-${i}`, 'v']));
  const over = /: the evaluation's macros ran over 100,000 iterations \(see the limits in docs\/traffic-policy\.md\)$/;

  it('a request of 2,000 headers runs the nested macro over its budget: an error, the rule does not match, later rules still run', () => {
    const r = evaluate(policy, 'on_http_request', request({ headers: headers(2000) }), new PolicyState());
    expect(r.outcome).toBe('continue');
    expect(r.rules.map((x) => [x.name, x.matched])).toEqual([['nested', false], ['decided elsewhere', false], ['no macro', true]]);
    expect(r.rules[0].error).toMatch(over);
    expect(r.rules[1].error).toMatch(over);
    expect(r.mutations.request.set_headers).toEqual({ 'x-ran': '1' });
  });

  it('the budget is per evaluation: the same policy on a request of 10 headers matches', () => {
    const state = new PolicyState();
    evaluate(policy, 'on_http_request', request({ headers: headers(2000) }), state);
    const r = evaluate(policy, 'on_http_request', request({ headers: headers(10) }), state);
    expect(r.rules[0]).toMatchObject({ name: 'nested', matched: true });
    expect(r.rules[0].error).toBeUndefined();
    expect(r.outcome).toMatchObject({ response: { status: 403 } });
  });
});
