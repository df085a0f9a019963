// The access and webhook modules behind the real `--ingress` listener, configured through the
// API as a user would: a denied address gets 403, a deleted policy restricts nothing on the
// next request, a user agent is denied, a Stripe-signed webhook reaches the upstream through
// `edgeform agent` with its body intact while a bad or stale one is refused, a saml
// route answers 501, and an oidc route whose provider is down answers 502 with a code. The webhook secret is stored sealed and used unsealed only in memory.
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { freePort } from '../helpers/ports.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const STRIPE_SECRET = 'whsec_test_0123456789abcdef';

let s: TestServer;
let port: number;
let ca: string;
let upstream: http.Server;
let agent: AgentProcess;
let denyPolicy: string;
const received: { path: string; body: string }[] = [];
const get = (path: string, headers?: Record<string, string>) => edgeRequest({ port, host: 'mods.example.com', path, ca, headers });
const post = (path: string, body: string, headers: Record<string, string>) =>
  edgeRequest({ port, host: 'mods.example.com', path, method: 'POST', ca, body, headers: { 'content-type': 'application/json', ...headers } });

async function created(path: string, body: unknown): Promise<string> {
  const r = await s.post(path, body);
  if (r.status !== 201) throw new Error(`${path}: ${r.status} ${r.text}`);
  return r.body.id;
}

const stripeSig = (secret: string, t: number, body: string) => `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
  port = ingressPort(s, 443);
  ca = localCa(s);
  upstream = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('upstream saw it');
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const cr = await credentialToken(s);
  agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=mods', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');

  denyPolicy = await created('/ip_policies', { description: 'deny loopback' });
  await created('/ip_policy_rules', { ip_policy_id: denyPolicy, cidr: '127.0.0.1/32', action: 'deny' });
  const allowTen = await created('/ip_policies', { description: 'allow 10/8' });
  await created('/ip_policy_rules', { ip_policy_id: allowTen, cidr: '10.0.0.0/8', action: 'allow' });
  const ok = await created('/backends/http_response', { body: 'reached the backend', status_code: 200, headers: {} });
  const tunnel = await created('/backends/tunnel_group', { labels: { app: 'mods' } });
  const edge = await created('/edges/https', { hostports: ['mods.example.com:443'] });
  const route = (match: string, modules: Record<string, unknown>, backend = ok) => created(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match, backend: { backend_id: backend }, ...modules });
  await route('/denied', { ip_restriction: { ip_policy_ids: [denyPolicy] } });
  await route('/ten-only', { ip_restriction: { ip_policy_ids: [allowTen] } });
  await route('/ua', { user_agent_filter: { allow: ['^curl/'], deny: ['(?i)bot'] } });
  await route('/hooks/stripe', { webhook_verification: { provider: 'Stripe', secret: STRIPE_SECRET } }, tunnel);
  await route('/idp-down', { oidc: { issuer: `http://127.0.0.1:${await freePort()}`, client_id: 'edge', client_secret: 'oidc-secret' } });
  await route('/sso', { saml: { idp_metadata: '<EntityDescriptor xmlns="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://idp.example.com"/>' } });
  // The table follows the store on the next request; wait until the last route answers.
  await until(async () => (await get('/sso')).status === 502);
}, 60_000);

afterAll(async () => {
  agent?.kill();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
  await s?.close();
});

describe('access and webhook modules behind --ingress', () => {
  it('a denied address gets 403 with its code and never the backend', async () => {
    const r = await get('/denied');
    expect(r.status).toBe(403);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_780');
    expect(r.text).not.toContain('reached the backend');
  });

  it('an address no allow rule covers is refused', async () => {
    expect((await get('/ten-only')).status).toBe(403);
  });

  it('a deleted policy counts as zero rules on the next request', async () => {
    expect((await s.del(`/ip_policies/${denyPolicy}`)).status).toBe(204);
    const r = await get('/denied');
    expect(r.status).toBe(200);
    expect(r.text).toBe('reached the backend');
  });

  it('a user agent the filter denies gets 403; an allowed one passes', async () => {
    const bot = await get('/ua', { 'user-agent': 'curl/8.5 SomeBot' });
    expect(bot.status).toBe(403);
    expect(bot.headers['edgeform-error-code']).toBe('ERR_SERVICE_781');
    expect((await get('/ua', { 'user-agent': 'Mozilla/5.0' })).status).toBe(403);
    expect((await get('/ua', { 'user-agent': 'curl/8.5.0' })).status).toBe(200);
  });

  it('a Stripe-signed webhook reaches the upstream with its body intact; a bad or stale one is refused', async () => {
    const body = JSON.stringify({ id: 'evt_1', type: 'charge.succeeded', data: { amount: 4200 } });
    const t = Math.floor(Date.now() / 1000);
    const good = await post('/hooks/stripe', body, { 'stripe-signature': stripeSig(STRIPE_SECRET, t, body) });
    expect(good.status).toBe(200);
    expect(good.text).toBe('upstream saw it');
    expect(received.at(-1)).toEqual({ path: '/hooks/stripe', body });

    const count = received.length;
    const forged = await post('/hooks/stripe', body, { 'stripe-signature': stripeSig('whsec_someone_else', t, body) });
    expect(forged.status).toBe(403);
    expect(forged.headers['edgeform-error-code']).toBe('ERR_SERVICE_782');
    expect(forged.text).not.toContain(STRIPE_SECRET);
    const stale = await post('/hooks/stripe', body, { 'stripe-signature': stripeSig(STRIPE_SECRET, t - 400, body) });
    expect(stale.headers['edgeform-error-code']).toBe('ERR_SERVICE_783');
    expect((await post('/hooks/stripe', body, {})).status).toBe(403);
    expect(received.length).toBe(count);
  });

  it('the webhook secret is write-only in the API', async () => {
    const edges = await s.get('/edges/https');
    const route = edges.body.https_edges[0].routes.find((r: { match: string }) => r.match === '/hooks/stripe');
    expect(route.webhook_verification).toMatchObject({ provider: 'Stripe', secret: null });
  });

  it('an oidc route whose provider is down answers 502 with a code, never the backend', async () => {
    const r = await get('/idp-down');
    expect(r.status).toBe(502);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_803');
    expect(r.text).not.toContain('reached the backend');
  });

  it('a saml route whose idp_metadata names no IdP SSO service answers 502 with a code, never the backend', async () => {
    const r = await get('/sso');
    expect(r.status).toBe(502);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_817');
    expect(r.text).toContain('idp_metadata');
    expect(r.text).not.toContain('reached the backend');
  });
});
