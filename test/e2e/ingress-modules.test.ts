// Issue 16, each route module doing what its name says, as a client over a real socket sees
// it: `edgeform serve --ingress 443=...`, routes applied with `edgeform apply -f`, and an
// upstream on loopback reached through `edgeform agent --label app=mods`. The upstream
// echoes what it got, so what the modules changed on the way is visible.
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeErrorCode, edgeRequest, nextMessage, webSocket, wsOpen, type EdgeRequest } from '../helpers/ingress-client.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const SECRETS = { github: 'gh-webhook-secret-0123', stripe: 'whsec_stripe0123456789', slack: 'slack-signing-secret-0123', shopify: 'shopify-secret-0123' };
const BIG = 'compressible text, compressible text, '.repeat(600); // ~23 KB
const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), randomBytes(20_000)]);

let ing: Ingress;
let port: number;
let ca: string;
let upstream: http.Server;
let echo: net.Server;
const agents: AgentProcess[] = [];
/** Upstream hits by path (without the query). */
const hits = new Map<string, number>();
let cbFail = true;

const rateLimit = (capacity: number) => stringify({
  on_http_request: [{ name: 'five a minute', actions: [{ type: 'rate-limit', config: { name: 'per-client', algorithm: 'sliding_window', capacity, rate: '60s', bucket_key: ['conn.client_ip'] } }] }],
});
const POLICY = stringify({
  on_http_request: [
    { name: 'block flagged', expressions: ["'x-block' in req.headers"], actions: [{ type: 'deny', config: { status_code: 451 } }] },
    { name: 'tag the request', actions: [{ type: 'add-headers', config: { headers: { 'x-from-policy': 'policy-request' } } }] },
  ],
  on_http_response: [
    { name: 'tag the response', expressions: ['res.status_code == 200'], actions: [{ type: 'add-headers', config: { headers: { 'x-policy-response': 'seen' } } }] },
  ],
});
const DENY_ALL = stringify({ on_http_request: [{ actions: [{ type: 'deny' }] }] });

function manifest(): string {
  const ip = (...names: string[]) => ({ ip_restriction: { ip_policy_ids: names.map((n) => `IPPolicy/${n}`) } });
  const hook = (provider: keyof typeof SECRETS) => ({ webhook_verification: { provider, secret: SECRETS[provider] } });
  const r = (match: string, modules: Record<string, unknown> = {}, backend = 'TunnelGroupBackend/mods') => ({ match_type: 'path_prefix', match, backend: { backend_id: backend }, ...modules });
  const docs = [
    { kind: 'IPPolicy', name: 'deny-self', rules: [{ cidr: '127.0.0.1/32', action: 'deny' }] },
    { kind: 'IPPolicy', name: 'allow-ten', rules: [{ cidr: '10.0.0.0/8', action: 'allow' }] },
    { kind: 'IPPolicy', name: 'allow-loopback', rules: [{ cidr: '127.0.0.0/8', action: 'allow' }] },
    { kind: 'IPPolicy', name: 'doomed', rules: [{ cidr: '127.0.0.0/8', action: 'deny' }] },
    { kind: 'TunnelGroupBackend', name: 'mods', labels: { app: 'mods' } },
    { kind: 'TunnelGroupBackend', name: 'echo', labels: { app: 'echo' } },
    {
      kind: 'HTTPSEdge',
      name: 'mods',
      hostports: ['mods.example.com:443'],
      routes: [
        r('/echo'),
        r('/ip/deny', ip('deny-self')),
        r('/ip/other', ip('allow-ten')),
        r('/ip/self', ip('allow-loopback')),
        r('/ip/both', ip('allow-loopback', 'deny-self')),
        r('/ip/deleted', ip('doomed')),
        r('/ua/deny', { user_agent_filter: { deny: ['(?i)bot'] } }),
        r('/ua/allow', { user_agent_filter: { allow: ['^curl/'], deny: ['^curl/7\\.0'] } }),
        r('/ua/off', { user_agent_filter: { enabled: false, deny: ['.*'] } }),
        r('/hook/github', hook('github')),
        r('/hook/stripe', hook('stripe')),
        r('/hook/slack', hook('slack')),
        r('/hook/shopify', hook('shopify')),
        r('/limited', { traffic_policy: { value: rateLimit(5) } }),
        r('/order', { ...ip('deny-self'), traffic_policy: { value: rateLimit(1) } }),
        r('/tp', { traffic_policy: { value: POLICY } }),
        r('/tp-off', { traffic_policy: { enabled: false, value: DENY_ALL } }),
        r('/headers', { request_headers: { add: { 'x-added': 'one' }, remove: ['x-secret-in'] }, response_headers: { add: { 'x-resp-added': 'two' }, remove: ['x-upstream-private'] } }),
        r('/cb', { circuit_breaker: { tripped_duration: 1, rolling_window: 10, num_buckets: 10, volume_threshold: 5, error_threshold_percentage: 0.5 } }),
        r('/compress', { compression: {} }),
        r('/ws', { websocket_tcp_converter: {} }, 'TunnelGroupBackend/echo'),
      ],
    },
  ];
  return docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}

const get = (p: string, o: Partial<EdgeRequest> = {}) => edgeRequest({ port, host: 'mods.example.com', path: p, ca, ...o });
const post = (p: string, body: string, headers: Record<string, string>) => get(p, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
const hmac = (secret: string, text: string, enc: 'hex' | 'base64' = 'hex') => createHmac('sha256', secret).update(text).digest(enc);
const now = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const p = (req.url ?? '/').split('?')[0];
    hits.set(p, (hits.get(p) ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (p === '/cb') return void res.writeHead(cbFail ? 500 : 200).end(cbFail ? 'upstream failing' : 'cb ok');
      // With their lengths, as most upstreams send a body they hold whole.
      if (p === '/compress/big') return void res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': BIG.length }).end(BIG);
      if (p === '/compress/small') return void res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 4 }).end('tiny');
      if (p === '/compress/png') return void res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length }).end(PNG);
      res.writeHead(200, { 'content-type': 'application/json', 'x-upstream-private': 'leak', server: 'upstream-server' });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() }));
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  echo = net.createServer((c) => { c.on('error', () => {}); c.pipe(c); });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  ing = await startIngress([443]);
  port = ing.port(443);
  await ing.apply(manifest());
  const token = await agentToken(ing);
  for (const [label, target] of [['app=mods', upstream], ['app=echo', echo]] as const) {
    const a = startAgent(['--api-url', ing.url, '--authtoken', token, '--label', label, '--forwards-to', `127.0.0.1:${(target.address() as AddressInfo).port}`]);
    agents.push(a);
    await a.waitFor('online: tn_', 30_000);
  }
  ca = await ing.ca();
});

afterAll(async () => {
  for (const a of agents) a.kill();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  await new Promise((r) => echo?.close(r));
  killServers();
  removeTempDirs();
});

describe('ip_restriction', () => {
  it.each([
    ['/ip/deny', 403, 'a deny rule covers the client'],
    ['/ip/other', 403, 'there is an allow rule and none covers the client'],
    ['/ip/self', 200, 'an allow rule covers the client'],
    ['/ip/both', 403, 'deny beats allow across the listed policies'],
  ])('%s answers %i: %s', async (p, status) => {
    const r = await get(p);
    if (status === 403) {
      edgeErrorCode(r, 403);
      expect(r.text).not.toContain('"headers"');
    } else {
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text).url).toBe(p);
    }
  });

  it('a deleted policy counts as zero rules (SPEC): the route lets the client through', async () => {
    edgeErrorCode(await get('/ip/deleted'), 403);
    const policies = (await ing.api('GET', '/ip_policies')).body.ip_policies as any[];
    const rule = (await ing.api('GET', '/ip_policy_rules')).body.ip_policy_rules.find((x: any) => x.cidr === '127.0.0.0/8' && x.action === 'deny');
    const doomed = policies.find((x) => x.id === rule.ip_policy.id);
    expect((await ing.api('DELETE', `/ip_policies/${doomed.id}`)).status).toBe(204);
    const r = await get('/ip/deleted');
    expect(r.status).toBe(200);
  });

  it('runs before traffic_policy: refused requests never reach the rate limit', async () => {
    for (let i = 0; i < 3; i++) edgeErrorCode(await get('/order'), 403);
  });
});

describe('user_agent_filter', () => {
  it.each([
    ['/ua/deny', 'GoodBot/1.0', 403],
    ['/ua/deny', 'curl/8.4.0', 200],
    ['/ua/allow', 'curl/8.4.0', 200],
    ['/ua/allow', 'curl/7.0.1', 403],
    ['/ua/allow', 'Mozilla/5.0', 403],
    ['/ua/off', 'anything', 200],
  ])('%s with User-Agent %s answers %i', async (p, ua, status) => {
    const r = await get(p, { headers: { 'user-agent': ua } });
    if (status === 403) edgeErrorCode(r, 403);
    else expect(r.status).toBe(200);
  });
});

describe('webhook_verification', () => {
  const body = JSON.stringify({ id: 'evt_1', type: 'ping', data: { n: 1 } });
  type Signer = (b: string, t?: number, secret?: string) => Record<string, string>;
  const signed: Record<keyof typeof SECRETS, Signer> = {
    github: (b, _t, k = SECRETS.github) => ({ 'x-hub-signature-256': `sha256=${hmac(k, b)}`, 'x-github-event': 'ping' }),
    stripe: (b, t = now(), k = SECRETS.stripe) => ({ 'stripe-signature': `t=${t},v1=${hmac(k, `${t}.${b}`)}` }),
    slack: (b, t = now(), k = SECRETS.slack) => ({ 'x-slack-request-timestamp': String(t), 'x-slack-signature': `v0=${hmac(k, `v0:${t}:${b}`)}` }),
    shopify: (b, _t, k = SECRETS.shopify) => ({ 'x-shopify-hmac-sha256': hmac(k, b, 'base64') }),
  };

  it.each(Object.keys(signed) as (keyof typeof SECRETS)[])('%s: a signature made as the provider documents passes, with the body intact', async (provider) => {
    const r = await post(`/hook/${provider}`, body, signed[provider](body));
    expect(r.status, r.text).toBe(200);
    expect(JSON.parse(r.text).body).toBe(body);
  });

  it.each(Object.keys(signed) as (keyof typeof SECRETS)[])('%s: a wrong, a missing, or another body\'s signature gets 403', async (provider) => {
    const other = signed[provider]('{"tampered":true}');
    edgeErrorCode(await post(`/hook/${provider}`, body, other), 403);
    edgeErrorCode(await post(`/hook/${provider}`, body, {}), 403);
    edgeErrorCode(await post(`/hook/${provider}`, body, signed[provider](body, undefined, 'not-the-secret')), 403);
  });

  it.each(['stripe', 'slack'] as const)('%s: a correct signature over a timestamp an hour old is refused (the provider\'s tolerance)', async (provider) => {
    edgeErrorCode(await post(`/hook/${provider}`, body, signed[provider](body, now() - 3600)), 403);
  });

  it('never logs the secrets', () => {
    for (const s of Object.values(SECRETS)) expect(ing.serving.stdout() + ing.serving.stderr()).not.toContain(s);
  });
});

describe('traffic_policy', () => {
  it('a rate limit of 5 per 60 s lets five through and answers the sixth 429 with retry-after', async () => {
    for (let i = 1; i <= 5; i++) expect((await get('/limited')).status, `request ${i}`).toBe(200);
    const sixth = await get('/limited');
    expect(sixth.status).toBe(429);
    const after = Number(sixth.headers['retry-after']);
    expect(Number.isInteger(after)).toBe(true);
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(60);
    expect(hits.get('/limited')).toBe(5);
  });

  it('on_http_request edits the request and can deny; on_http_response edits the answer', async () => {
    const r = await get('/tp');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).headers['x-from-policy']).toBe('policy-request');
    expect(r.headers['x-policy-response']).toBe('seen');
    const before = hits.get('/tp');
    const denied = await get('/tp', { headers: { 'x-block': '1' } });
    expect(denied.status).toBe(451);
    expect(hits.get('/tp')).toBe(before);
  });

  it('enabled: false skips the policy', async () => {
    expect((await get('/tp-off')).status).toBe(200);
  });
});

describe('request_headers and response_headers', () => {
  it('add and remove on the way up and on the way back', async () => {
    const r = await get('/headers', { headers: { 'x-secret-in': 'do not forward', 'x-kept': 'yes' } });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.text).headers;
    expect(seen['x-added']).toBe('one');
    expect(seen['x-kept']).toBe('yes');
    expect(seen['x-secret-in']).toBeUndefined();
    expect(r.headers['x-resp-added']).toBe('two');
    expect(r.headers['x-upstream-private']).toBeUndefined();
  });
});

describe('circuit_breaker', () => {
  it('trips at volume_threshold failing requests, answers 503 without reaching the upstream, then half-opens', async () => {
    cbFail = true;
    for (let i = 0; i < 5; i++) expect((await get('/cb')).status).toBe(500);
    const tripped = await get('/cb');
    edgeErrorCode(tripped, 503);
    expect(hits.get('/cb')).toBe(5);
    cbFail = false;
    // After tripped_duration (1 s) one request is let through to test the upstream.
    await until(async () => (await get('/cb')).status === 200, 15_000, () => 'the circuit never half-opened');
    expect(hits.get('/cb')).toBe(6);
    expect((await get('/cb')).text).toBe('cb ok');
  });
});

describe('compression', () => {
  it('gzip and br by Accept-Encoding; identity without it', async () => {
    const gz = await get('/compress/big', { headers: { 'accept-encoding': 'gzip' } });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).toString()).toBe(BIG);
    expect(gz.body.length).toBeLessThan(BIG.length / 4);
    const br = await get('/compress/big', { headers: { 'accept-encoding': 'br' } });
    expect(br.headers['content-encoding']).toBe('br');
    expect(brotliDecompressSync(br.body).toString()).toBe(BIG);
    const plain = await get('/compress/big');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.text).toBe(BIG);
  });

  it('skips already compressed types and small bodies', async () => {
    const png = await get('/compress/png', { headers: { 'accept-encoding': 'gzip, br' } });
    expect(png.headers['content-encoding']).toBeUndefined();
    expect(png.body.equals(PNG)).toBe(true);
    const small = await get('/compress/small', { headers: { 'accept-encoding': 'gzip, br' } });
    expect(small.headers['content-encoding']).toBeUndefined();
    expect(small.text).toBe('tiny');
  });
});

describe('websocket_tcp_converter', () => {
  it('turns a WebSocket from the client into a TCP stream to the backend', async () => {
    const ws = webSocket(port, 'mods.example.com', ca, '/ws');
    try {
      await wsOpen(ws);
      const reply = nextMessage(ws);
      ws.send(Buffer.from('bytes over tcp'));
      expect(Buffer.from(await reply).toString()).toBe('bytes over tcp');
    } finally {
      ws.close();
    }
  });
});
