// ip_restriction (and the pure ipAllowed TCP/TLS edges use), user_agent_filter and the sign-in
// modules that refuse before any provider call, each driven through a fake Exchange.
import { describe, expect, it } from 'vitest';
import { ipAllowed, ipRestriction } from '../../server/ingress/modules/ip-restriction.js';
import { userAgentFilter } from '../../server/ingress/modules/user-agent-filter.js';
import { FILTERS } from '../../server/ingress/modules/index.js';
import { MODULE_ORDER } from '../../server/ingress/modules/order.js';
import { emptyTable, fakeDeps, run } from '../helpers/fake-exchange.js';

const table = emptyTable(
  new Map([
    ['ipp_office', [{ cidr: '10.1.0.0/16', action: 'allow' as const }, { cidr: '2001:db8::/32', action: 'allow' as const }]],
    ['ipp_block', [{ cidr: '10.1.2.0/24', action: 'deny' as const }, { cidr: '2001:db8:bad::/48', action: 'deny' as const }]],
    ['ipp_denyonly', [{ cidr: '192.0.2.0/24', action: 'deny' as const }]],
    ['ipp_mapped', [{ cidr: '::ffff:198.51.100.0/120', action: 'allow' as const }]],
    ['ipp_empty', []],
  ]),
);

describe('ipAllowed', () => {
  it.each([
    { why: 'no policies: everything passes', ids: [], ip: '203.0.113.9', want: true },
    { why: 'a deleted policy counts as zero rules', ids: ['ipp_deleted'], ip: '203.0.113.9', want: true },
    { why: 'a policy with no rules restricts nothing', ids: ['ipp_empty'], ip: '203.0.113.9', want: true },
    { why: 'an address an allow rule covers', ids: ['ipp_office'], ip: '10.1.7.7', want: true },
    { why: 'with an allow rule, an address none covers is refused', ids: ['ipp_office'], ip: '10.2.0.1', want: false },
    { why: 'deny beats allow across policies', ids: ['ipp_office', 'ipp_block'], ip: '10.1.2.3', want: false },
    { why: 'allowed next to the denied /24', ids: ['ipp_office', 'ipp_block'], ip: '10.1.3.3', want: true },
    { why: 'IPv6 allowed', ids: ['ipp_office'], ip: '2001:db8:1::5', want: true },
    { why: 'IPv6 deny beats allow', ids: ['ipp_office', 'ipp_block'], ip: '2001:db8:bad::1', want: false },
    { why: 'IPv4-mapped IPv6 client matches an IPv4 rule', ids: ['ipp_office'], ip: '::ffff:10.1.0.1', want: true },
    { why: 'IPv4-mapped IPv6 client denied by an IPv4 rule', ids: ['ipp_office', 'ipp_block'], ip: '::ffff:10.1.2.9', want: false },
    { why: 'a rule written as a mapped network covers the IPv4 client', ids: ['ipp_mapped'], ip: '198.51.100.20', want: true },
    { why: 'and the mapped client', ids: ['ipp_mapped'], ip: '::ffff:198.51.100.20', want: true },
    { why: 'outside the mapped network', ids: ['ipp_mapped'], ip: '198.51.101.20', want: false },
    { why: 'deny-only: others pass', ids: ['ipp_denyonly'], ip: '198.51.100.1', want: true },
    { why: 'deny-only: the denied one does not', ids: ['ipp_denyonly'], ip: '192.0.2.44', want: false },
    { why: 'deny-only: an unreadable address is refused', ids: ['ipp_denyonly'], ip: 'not-an-ip', want: false },
    { why: 'an IPv4 rule never covers an unrelated IPv6 address', ids: ['ipp_office'], ip: '::1', want: false },
  ])('$why', ({ ids, ip, want }) => {
    expect(ipAllowed(table, ids, ip)).toBe(want);
  });
});

describe('ip_restriction filter', () => {
  const filter = ipRestriction({ enabled: true, ip_policy_ids: ['ipp_office', 'ipp_block'] }, { id: 'rt' }, fakeDeps());
  it('refuses a denied address with 403 and its code, before the backend', async () => {
    const r = await run(filter, { clientIp: '10.1.2.3' }, table);
    expect(r).toMatchObject({ reached: false, status: 403, code: 'ERR_SERVICE_780' });
    expect(String(r.answer!.body)).toContain('ERR_SERVICE_780');
    expect(String(r.answer!.body)).toContain('10.1.2.3 is not allowed');
  });
  it('passes an allowed address on', async () => {
    expect(await run(filter, { clientIp: '10.1.9.9' }, table)).toMatchObject({ reached: true, answer: undefined });
  });
  it('reads the read form (ip_policies) as well', async () => {
    const f = ipRestriction({ enabled: true, ip_policies: [{ id: 'ipp_denyonly' }] }, { id: 'rt' }, fakeDeps());
    expect((await run(f, { clientIp: '192.0.2.1' }, table)).status).toBe(403);
  });
});

describe('user_agent_filter', () => {
  const make = (allow: string[], deny: string[]) => userAgentFilter({ enabled: true, allow, deny }, { id: 'rt' }, fakeDeps());
  it.each([
    { why: 'no patterns: everything passes', allow: [], deny: [], ua: 'curl/8.0', pass: true },
    { why: 'a deny pattern matches anywhere in the header', allow: [], deny: ['bot'], ua: 'Mozilla/5.0 (compatible; Googlebot/2.1)', pass: false },
    { why: 'deny beats allow', allow: ['Mozilla'], deny: ['(?i)googlebot'], ua: 'Mozilla/5.0 Googlebot', pass: false },
    { why: 'with allow patterns, an agent none matches is refused', allow: ['^curl/'], deny: [], ua: 'wget/1.0', pass: false },
    { why: 'an allowed agent passes', allow: ['^curl/'], deny: [], ua: 'curl/8.4.0', pass: true },
    { why: 'a missing header is the empty string', allow: ['^curl/'], deny: [], ua: undefined, pass: false },
    { why: 'RE2 named groups', allow: ['^(?P<tool>curl|httpie)/'], deny: [], ua: 'httpie/3', pass: true },
  ])('$why', async ({ allow, deny, ua, pass }) => {
    const r = await run(make(allow, deny), { headers: ua === undefined ? {} : { 'user-agent': ua } });
    expect(r.reached).toBe(pass);
    if (!pass) expect(r).toMatchObject({ status: 403, code: 'ERR_SERVICE_781' });
  });
  it('a pattern that backtracks in JavaScript runs in linear time on RE2', async () => {
    // (a|aa)+$ against 5,000 a's and a "!" would not finish on a backtracking engine.
    const r = await run(make([], ['^(a|aa)+$']), { headers: { 'user-agent': `${'a'.repeat(5000)}!` } });
    expect(r.reached).toBe(true);
  });
  it('a deny pattern RE2 cannot compile refuses rather than lets through, and is logged', async () => {
    const logs: Record<string, unknown>[] = [];
    const f = userAgentFilter({ enabled: true, allow: [], deny: ['(?<=x)y'] }, { id: 'rt' }, fakeDeps(Date.now(), logs));
    expect((await run(f, { headers: { 'user-agent': 'curl' } })).status).toBe(403);
    expect(logs[0]).toMatchObject({ level: 'warn', pattern: '(?<=x)y' });
  });
});

describe('oauth, oidc and saml', () => {
  it('saml without its request-signing key or a public base URL refuses with a code (502) and never reaches the backend', async () => {
    const r = await run(FILTERS.saml!({ enabled: true }, { id: 'rt' }, fakeDeps()), { method: 'GET' });
    expect(r).toMatchObject({ reached: false, status: 502, code: 'ERR_SERVICE_817' });
  });
  it('oauth without client_id on a server with no managed app answers 501 naming the settings, never the backend', async () => {
    const r = await run(FILTERS.oauth!({ enabled: true, provider: { google: {} } }, { id: 'rt' }, fakeDeps()), { method: 'GET' });
    expect(r).toMatchObject({ reached: false, status: 501, code: 'ERR_SERVICE_805' });
    expect(String(r.answer!.body)).toContain('EDGEFORM_OAUTH_GOOGLE_CLIENT_ID');
  });
  it('oidc cannot be built without the server key, so the chain refuses the route instead of serving it', () => {
    expect(() => FILTERS.oidc!({ enabled: true, issuer: 'https://id.example.com', client_id: 'c', client_secret: 's' }, { id: 'rt' }, fakeDeps())).toThrow(/server key/);
  });
  it('the registry has a filter for every module of MODULE_ORDER, and nothing else', () => {
    expect(Object.keys(FILTERS).sort()).toEqual(MODULE_ORDER.map((m) => m.name).sort());
  });
});

describe('ip_restriction with inline rules (an agent endpoint\'s allow_cidrs, deny_cidrs)', () => {
  const make = (allow: string[], deny: string[], ids: string[] = []) => ipRestriction({ enabled: true, ip_policy_ids: ids, allow_cidrs: allow, deny_cidrs: deny }, { id: 'tn_x' }, fakeDeps());
  it.each([
    { why: 'an address an inline allow rule covers', allow: ['10.0.0.0/8'], deny: [], ip: '10.9.9.9', pass: true },
    { why: 'with an inline allow rule, one none covers is refused', allow: ['10.0.0.0/8'], deny: [], ip: '11.0.0.1', pass: false },
    { why: 'inline deny beats inline allow', allow: ['10.0.0.0/8'], deny: ['10.1.0.0/16'], ip: '10.1.2.3', pass: false },
    { why: 'deny-only: others pass', allow: [], deny: ['192.0.2.0/24'], ip: '198.51.100.1', pass: true },
    { why: 'IPv6', allow: ['2001:db8::/32'], deny: [], ip: '2001:db8::5', pass: true },
    { why: 'IPv4-mapped client against an IPv4 rule', allow: ['127.0.0.0/8'], deny: [], ip: '::ffff:127.0.0.1', pass: true },
    { why: 'an unreadable address is refused', allow: [], deny: ['192.0.2.0/24'], ip: 'not-an-ip', pass: false },
  ])('$why', async ({ allow, deny, ip, pass }) => {
    const r = await run(make(allow, deny), { clientIp: ip }, table);
    expect(r.reached).toBe(pass);
    if (!pass) expect(r).toMatchObject({ status: 403, code: 'ERR_SERVICE_780' });
  });
  it('inline rules and listed policies together: a deny in either refuses', async () => {
    expect((await run(make(['10.1.0.0/16'], [], ['ipp_block']), { clientIp: '10.1.2.3' }, table)).reached).toBe(false);
    expect((await run(make(['10.1.0.0/16'], [], ['ipp_block']), { clientIp: '10.1.3.3' }, table)).reached).toBe(true);
  });
});

describe('basic_auth (agents\' endpoints)', () => {
  const filter = FILTERS.basic_auth!({ enabled: true, credentials: [{ username: 'ada', password: 'correct horse' }, { username: 'bob', password: 'p:ss:word' }] }, { id: 'tn_x' }, fakeDeps());
  const auth = (v: string) => ({ headers: { authorization: v } });
  const basic = (s: string) => `Basic ${Buffer.from(s).toString('base64')}`;
  it.each([
    { why: 'no Authorization header', headers: {}, pass: false },
    { why: 'the right credential', ...auth(basic('ada:correct horse')), pass: true },
    { why: 'the scheme in any case', ...auth(`bAsIc ${Buffer.from('ada:correct horse').toString('base64')}`), pass: true },
    { why: 'a password with colons (the first colon splits)', ...auth(basic('bob:p:ss:word')), pass: true },
    { why: 'another credential\'s password', ...auth(basic('bob:correct horse')), pass: false },
    { why: 'no colon', ...auth(basic('adacorrect horse')), pass: false },
    { why: 'a Bearer token', ...auth('Bearer abc'), pass: false },
    { why: 'not base64', ...auth('Basic ***'), pass: false },
    { why: 'an oversized header', ...auth(basic(`ada:${'x'.repeat(2000)}`)), pass: false },
  ])('$why', async ({ headers, pass }) => {
    const r = await run(filter, { headers });
    expect(r.reached).toBe(pass);
    if (!pass) {
      expect(r).toMatchObject({ status: 401, code: 'ERR_SERVICE_788' });
      expect(r.answer!.headers!['www-authenticate']).toBe('Basic realm="edgeform", charset="UTF-8"');
    }
  });
  it('with no credential configured, everything is refused', async () => {
    const none = FILTERS.basic_auth!({ enabled: true, credentials: [] }, { id: 'tn_x' }, fakeDeps());
    expect((await run(none, auth(basic('ada:correct horse')))).reached).toBe(false);
  });
});
