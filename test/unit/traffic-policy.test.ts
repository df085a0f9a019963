// The traffic-policy validator on its own (the traffic-policy engine reuses it): every rule
// of the rate-limit action from SPEC, the document's shape, YAML and JSON alike, and the
// path of each problem inside the policy.
import { describe, expect, it } from 'vitest';
import { compileTrafficPolicy, parseDuration, parseTrafficPolicy, type TrafficPolicy } from '../../provider/catalog/validate/traffic-policy.js';

/** The typed rate-limit configs the compiler gives for a phase. */
function rateLimits(text: string) {
  const r = compileTrafficPolicy(text);
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return (r.compiled.on_http_request ?? []).flatMap((rule) => rule.actions.filter((a) => a.type === 'rate-limit').map((a) => a.config));
}

const config = (over: Record<string, unknown> = {}) => ({ name: 'limit', algorithm: 'sliding_window', capacity: 10, rate: '60s', bucket_key: ['req.host'], ...over });
const policy = (over: Record<string, unknown> = {}, phase = 'on_http_request') => ({ [phase]: [{ actions: [{ type: 'rate-limit', config: config(over) }] }] });
const AT = 'on_http_request[0].actions[0].config';

/** The first problem's path and message for a document given as JSON text. */
function problem(doc: unknown) {
  const r = parseTrafficPolicy(typeof doc === 'string' ? doc : JSON.stringify(doc));
  return r.ok ? undefined : r.issues[0];
}

describe('rate-limit configuration', () => {
  it.each([
    { reason: 'name missing', over: { name: undefined }, path: `${AT}.name` },
    { reason: 'name empty', over: { name: '' }, path: `${AT}.name` },
    { reason: 'name of 1024 characters', over: { name: 'n'.repeat(1024) }, path: `${AT}.name`, says: /fewer than 1024/ },
    { reason: 'name of 1024 emoji (characters are code points)', over: { name: '😀'.repeat(1024) }, path: `${AT}.name` },
    { reason: 'name not a string', over: { name: 7 }, path: `${AT}.name` },
    { reason: 'algorithm missing', over: { algorithm: undefined }, path: `${AT}.algorithm` },
    { reason: 'algorithm other than sliding_window', over: { algorithm: 'fixed_window' }, path: `${AT}.algorithm`, says: /sliding_window/ },
    { reason: 'capacity missing', over: { capacity: undefined }, path: `${AT}.capacity` },
    { reason: 'capacity 0', over: { capacity: 0 }, path: `${AT}.capacity`, says: /^capacity 0 is out of range 1\.\.2,000,000,000$/ },
    { reason: 'capacity over 2,000,000,000', over: { capacity: 2_000_000_001 }, path: `${AT}.capacity` },
    { reason: 'capacity fractional', over: { capacity: 1.5 }, path: `${AT}.capacity` },
    { reason: 'capacity as a string', over: { capacity: '10' }, path: `${AT}.capacity` },
    { reason: 'rate missing', over: { rate: undefined }, path: `${AT}.rate` },
    { reason: 'rate without a unit', over: { rate: '60' }, path: `${AT}.rate` },
    { reason: 'rate as a number', over: { rate: 60 }, path: `${AT}.rate` },
    { reason: 'rate not a multiple of ten seconds', over: { rate: '95s' }, path: `${AT}.rate`, says: /multiple of 10s/ },
    { reason: 'rate under 60s', over: { rate: '50s' }, path: `${AT}.rate`, says: /60s to 24h/ },
    { reason: 'rate over 24h', over: { rate: '24h10s' }, path: `${AT}.rate` },
    { reason: 'rate with sub-second parts', over: { rate: '60s500ms' }, path: `${AT}.rate` },
    { reason: 'bucket_key missing', over: { bucket_key: undefined }, path: `${AT}.bucket_key` },
    { reason: 'bucket_key empty', over: { bucket_key: [] }, path: `${AT}.bucket_key` },
    { reason: 'bucket_key of eleven entries', over: { bucket_key: Array(11).fill('req.host') }, path: `${AT}.bucket_key`, says: /1 to 10/ },
    { reason: 'bucket_key not a list', over: { bucket_key: 'req.host' }, path: `${AT}.bucket_key` },
    { reason: 'a bucket_key of another variable', over: { bucket_key: ['req.host', 'req.url'] }, path: `${AT}.bucket_key[1]` },
    { reason: 'a header key without quotes', over: { bucket_key: ['req.headers[x-api-key]'] }, path: `${AT}.bucket_key[0]` },
    { reason: 'a header key with mismatched quotes', over: { bucket_key: ["req.headers['x-api-key\"]"] }, path: `${AT}.bucket_key[0]` },
    { reason: 'getReqHeader of an invalid header name', over: { bucket_key: ["getReqHeader('X Api')"] }, path: `${AT}.bucket_key[0]` },
    { reason: 'an unknown config field', over: { burst: 5 }, path: `${AT}.burst`, says: /unknown rate-limit field/ },
  ])('$reason', ({ over, path, says }) => {
    const doc = policy(over);
    const p = problem(doc);
    expect(p?.path).toBe(path);
    if (says) expect(p?.message).toMatch(says);
  });

  it.each([
    ['60s', 60], ['90s', 90], ['10m', 600], ['1h', 3600], ['1h30m', 5400], ['24h', 86400], ['1440m', 86400], ['2m30s', 150],
  ])('accepts rate %s (%d s)', (rate, seconds) => {
    expect(rateLimits(JSON.stringify(policy({ rate })))[0]).toMatchObject({ rate: seconds });
  });

  it.each([
    [['req.host']],
    [['conn.client_ip']],
    [["req.headers['x-api-key']"]],
    [['req.headers["X-Api-Key"]']],
    [["getReqHeader('X-Api-Key')"]],
    [['getReqHeader("authorization")']],
    [['req.host', 'conn.client_ip', "req.headers['a']", "req.headers['b']", "req.headers['c']", "req.headers['d']", "req.headers['e']", "req.headers['f']", "req.headers['g']", "getReqHeader('h')"]],
  ])('accepts bucket_key %j', (keys) => {
    expect(parseTrafficPolicy(JSON.stringify(policy({ bucket_key: keys }))).ok).toBe(true);
  });

  it('accepts the limits: capacity 1 and 2,000,000,000; a name of 1023 characters, emoji counting one each', () => {
    for (const over of [{ capacity: 1 }, { capacity: 2_000_000_000 }, { name: 'n'.repeat(1023) }, { name: '😀'.repeat(1023) }]) expect(parseTrafficPolicy(JSON.stringify(policy(over))).ok).toBe(true);
  });

  it('runs in on_http_request and on_http_response, not on_tcp_connect', () => {
    expect(parseTrafficPolicy(JSON.stringify(policy({}, 'on_http_response'))).ok).toBe(true);
    expect(problem(policy({}, 'on_tcp_connect'))).toEqual({ path: 'on_tcp_connect[0].actions[0].type', message: 'rate-limit runs only in on_http_request and on_http_response, not in on_tcp_connect' });
  });

  it('reports every problem, each with its own path', () => {
    const r = parseTrafficPolicy(JSON.stringify(policy({ capacity: 0, rate: '1s', algorithm: 'x' })));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path).sort()).toEqual([`${AT}.algorithm`, `${AT}.capacity`, `${AT}.rate`]);
  });
});

describe('the document', () => {
  it('is read from YAML or JSON, with the same result', () => {
    const yaml = `on_http_request:
  - name: limit
    expressions: ["req.path.startsWith('/api')"]
    actions:
      - type: rate-limit
        config:
          name: api
          algorithm: sliding_window
          capacity: 100
          rate: 10m
          bucket_key:
            - conn.client_ip
on_http_response:
  - actions:
      - type: add-headers
        config: { headers: { x-limited: "1" } }
`;
    const fromYaml = parseTrafficPolicy(yaml);
    expect(fromYaml.ok).toBe(true);
    const fromJson = parseTrafficPolicy(JSON.stringify(fromYaml.ok ? fromYaml.policy : null));
    expect(fromJson).toEqual(fromYaml);
    expect(rateLimits(yaml)).toEqual([{ name: 'api', capacity: 100, enforce: true, rate: 600, bucket_key: ['conn.client_ip'], keys: [{ kind: 'client_ip' }] }]);
  });

  it('keeps the document as given (configs unchanged, defaults not filled in)', () => {
    const r = parseTrafficPolicy(JSON.stringify({ on_tcp_connect: [{ actions: [{ type: 'restrict-ips', config: { allow: ['10.0.0.0/8'] } }, { type: 'deny' }] }] }));
    const want: TrafficPolicy = { on_tcp_connect: [{ expressions: [], actions: [{ type: 'restrict-ips', config: { allow: ['10.0.0.0/8'] } }, { type: 'deny', config: {} }] }] };
    expect(r).toEqual({ ok: true, policy: want });
  });

  it('may be empty', () => {
    expect(parseTrafficPolicy('')).toEqual({ ok: true, policy: {} });
    expect(parseTrafficPolicy('{}')).toEqual({ ok: true, policy: {} });
  });

  it.each([
    { reason: 'text that does not parse', doc: 'on_http_request: [', path: '', says: /not valid YAML or JSON/ },
    { reason: 'a duplicated key', doc: 'on_http_request: []\non_http_request: []', path: '' },
    { reason: 'a list at the top', doc: '[]', path: '', says: /mapping of phases/ },
    { reason: 'a scalar at the top', doc: '"policy"', path: '' },
    { reason: 'an unknown phase', doc: { on_http: [] }, path: 'on_http', says: /unknown phase/ },
    { reason: 'a phase that is not a list', doc: { on_http_request: { actions: [] } }, path: 'on_http_request' },
    { reason: 'a rule that is not an object', doc: { on_http_request: ['deny'] }, path: 'on_http_request[0]' },
    { reason: 'a rule with an unknown field', doc: { on_http_request: [{ actions: [{ type: 'deny' }], when: 'x' }] }, path: 'on_http_request[0].when' },
    { reason: 'a rule name that is not a string', doc: { on_http_request: [{ name: 1, actions: [{ type: 'deny' }] }] }, path: 'on_http_request[0].name' },
    { reason: 'expressions that are not strings', doc: { on_http_request: [{ expressions: [true], actions: [{ type: 'deny' }] }] }, path: 'on_http_request[0].expressions' },
    { reason: 'a rule without actions', doc: { on_http_request: [{ name: 'r' }] }, path: 'on_http_request[0].actions' },
    { reason: 'an empty action list', doc: { on_http_request: [{ actions: [] }] }, path: 'on_http_request[0].actions' },
    { reason: 'an action without a type', doc: { on_http_request: [{ actions: [{ config: {} }] }] }, path: 'on_http_request[0].actions[0].type' },
    { reason: 'an action with an unknown field', doc: { on_http_request: [{ actions: [{ type: 'deny', with: {} }] }] }, path: 'on_http_request[0].actions[0].with' },
    { reason: 'a config that is not an object', doc: { on_http_request: [{ actions: [{ type: 'deny', config: [] }] }] }, path: 'on_http_request[0].actions[0].config' },
  ])('$reason: a problem at "$path"', ({ doc, path, says }) => {
    const p = problem(doc);
    expect(p?.path).toBe(path);
    if (says) expect(p?.message).toMatch(says);
  });

  it('restricts phases where the caller says so (TCP and TLS edges take on_tcp_connect only)', () => {
    const r = parseTrafficPolicy(JSON.stringify(policy()), { phases: ['on_tcp_connect'] });
    expect(r.ok ? undefined : r.issues[0]).toEqual({ path: 'on_http_request', message: expect.stringMatching(/does not apply here; phases here are on_tcp_connect/) });
  });
});

describe('parseDuration', () => {
  it.each([
    ['90s', 90], ['10m', 600], ['1h', 3600], ['1.5h', 5400], ['1h1m1s', 3661], ['250ms', 0.25],
  ])('%s is %d s', (text, seconds) => expect(parseDuration(text)).toBe(seconds));

  it.each(['', '10', 's', '10 s', '1d', '-60s', '10s '])('%j is not a duration', (text) => expect(parseDuration(text)).toBeUndefined());
});
