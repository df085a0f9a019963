// The access and webhook modules inside the real HTTP handler over loopback sockets (a plain
// node:http listener standing for the --ingress one): the route's filters refuse before the
// backend, a module with enabled: false is skipped, and a signed webhook reaches the backend.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';

const SECRET = 'gh-webhook-secret';
const ok = { id: 'bkdhr_ok', kind: 'HTTPResponseBackend', status_code: 200, body: 'reached the backend', headers: {} };
const backend = { backend: { enabled: true, backend_id: 'bkdhr_ok' } };

let ing: HttpIngress;
beforeAll(async () => {
  ing = await startHttpIngress(tableOf({
    edges: [{ id: 'edghts_app', hostports: ['app.example.com:443'], routes: [
      route('edghtsrt_blocked', '/blocked', { ...backend, ip_restriction: { enabled: true, ip_policy_ids: ['ipp_loopback_denied'] } }),
      route('edghtsrt_office', '/office', { ...backend, ip_restriction: { enabled: true, ip_policy_ids: ['ipp_office'] } }),
      route('edghtsrt_loopback', '/loopback', { ...backend, ip_restriction: { enabled: true, ip_policy_ids: ['ipp_loopback', 'ipp_deleted'] } }),
      route('edghtsrt_off', '/off', { ...backend, ip_restriction: { enabled: false, ip_policy_ids: ['ipp_loopback_denied'] } }),
      route('edghtsrt_ua', '/ua', { ...backend, user_agent_filter: { enabled: true, allow: ['^curl/'], deny: ['(?i)bot'] } }),
      route('edghtsrt_hook', '/hook', { ...backend, webhook_verification: { enabled: true, provider: 'github', secret: SECRET } }),
      route('edghtsrt_saml', '/saml', { ...backend, saml: { enabled: true, idp_metadata: '<EntityDescriptor/>' } }),
    ] }],
    backends: [ok],
    ipPolicies: {
      ipp_loopback_denied: [{ cidr: '127.0.0.0/8', action: 'deny' }],
      ipp_office: [{ cidr: '10.0.0.0/8', action: 'allow' }],
      ipp_loopback: [{ cidr: '127.0.0.1/32', action: 'allow' }],
    },
  }));
});
afterAll(() => ing.close());

describe('route modules in the HTTP handler', () => {
  it('ip_restriction: a denied address gets 403 with its code; the backend is not reached', async () => {
    const r = await ing.get('/blocked');
    expect(r.status).toBe(403);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_780');
    expect(r.text).not.toContain('reached the backend');
  });

  it('ip_restriction: an address no allow rule covers is refused; a covered one passes (a deleted policy adds nothing)', async () => {
    expect((await ing.get('/office')).status).toBe(403);
    const r = await ing.get('/loopback');
    expect(r.status).toBe(200);
    expect(r.text).toBe('reached the backend');
  });

  it('a module with enabled: false is skipped', async () => {
    expect((await ing.get('/off')).status).toBe(200);
  });

  it('user_agent_filter: deny beats allow, an agent no allow pattern matches is refused', async () => {
    expect((await ing.get('/ua', { headers: { 'user-agent': 'curl/8.5.0' } })).status).toBe(200);
    const bot = await ing.get('/ua', { headers: { 'user-agent': 'curl/8.5.0 (SuperBot)' } });
    expect(bot.status).toBe(403);
    expect(bot.headers['edgeform-error-code']).toBe('ERR_SERVICE_781');
    expect((await ing.get('/ua', { headers: { 'user-agent': 'Wget/1.21' } })).status).toBe(403);
  });

  it('webhook_verification: a GitHub-signed body passes; an altered one and an unsigned one are refused', async () => {
    const body = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
    const sig = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
    const good = await ing.get('/hook', { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-hub-signature-256': sig } });
    expect(good.status).toBe(200);
    expect(good.text).toBe('reached the backend');
    const altered = await ing.get('/hook', { method: 'POST', body: body.replace('awesome', 'evil'), headers: { 'content-type': 'application/json', 'x-hub-signature-256': sig } });
    expect(altered.status).toBe(403);
    expect(altered.headers['edgeform-error-code']).toBe('ERR_SERVICE_782');
    expect((await ing.get('/hook', { method: 'POST', body, headers: { 'content-type': 'application/json' } })).status).toBe(403);
  });

  it('saml that cannot start (no signing key at this ingress, unusable idp_metadata): 502 with a code, never the unprotected backend', async () => {
    const r = await ing.get('/saml');
    expect(r.status).toBe(502);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_817');
    expect(r.text).not.toContain('reached the backend');
  });
});
