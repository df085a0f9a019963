// Issue 28 item 10, over real sockets through a real agent: identity headers a client spells
// with underscores (edgeform_auth_*, any case) are dropped like the hyphenated ones, on
// HTTP/1.1 and HTTP/2; an edge's error page tells an anonymous client the code and what it
// means, never the backend's id, its labels or a tunnel id (the access log keeps them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { edgeRequest, h2Get } from '../helpers/ingress-client.js';
import { startSignInEdge, type SignInEdge } from '../helpers/sign-in-edge.js';
import { until } from '../helpers/wait.js';

const HOST = 'leaks.example.com';
let edge: SignInEdge;
let hiddenBackend = '';

beforeAll(async () => {
  edge = await startSignInEdge(HOST, 'leaks');
  await edge.route('/', {});
  hiddenBackend = (await edge.s.post('/backends/tunnel_group', { labels: { team: 'payments-internal', tier: 'secret-tier' } })).body.id;
  const edgeId = (await edge.s.get('/edges/https')).body.https_edges.find((e: { hostports: string[] }) => e.hostports.includes(`${HOST}:443`)).id;
  expect((await edge.s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: '/offline', backend: { backend_id: hiddenBackend } })).status).toBe(201);
  await until(async () => (await edgeRequest({ port: edge.ingress.port, host: HOST, ca: edge.ingress.ca })).status === 200);
}, 60_000);

afterAll(async () => {
  await edge?.close();
});

const FORGED = {
  edgeform_auth_subject: 'admin',
  EDGEFORM_AUTH_EMAIL: 'mallory@example.com',
  Edgeform_Auth_Name: 'Mallory',
  'edgeform-auth_provider': 'saml',
  'edgeform_auth-admin': 'yes',
  'edgeform-auth-groups': 'admins',
};

describe('identity headers spelt with underscores', () => {
  it('HTTP/1.1: none reaches the upstream, whatever its case; other underscore names still do', async () => {
    const r = await edgeRequest({ port: edge.ingress.port, host: HOST, path: '/who', ca: edge.ingress.ca, headers: { ...FORGED, x_custom_header: 'kept' } });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.text).headers as Record<string, string>;
    for (const name of Object.keys(seen)) expect(name.replaceAll('_', '-')).not.toMatch(/^edgeform-auth-/);
    expect(seen.x_custom_header).toBe('kept');
  });

  it('HTTP/2: none reaches the upstream', async () => {
    const r = await h2Get(edge.ingress.port, HOST, '/who', edge.ingress.ca, { ...Object.fromEntries(Object.entries(FORGED).map(([k, v]) => [k.toLowerCase(), v])), x_custom_header: 'kept' });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.body).headers as Record<string, string>;
    for (const name of Object.keys(seen)) expect(name.replaceAll('_', '-')).not.toMatch(/^edgeform-auth-/);
    expect(seen.x_custom_header).toBe('kept');
  });
});

describe('edge error pages', () => {
  it('a route whose tunnel-group backend has no online tunnel: 502 ERR_SERVICE_742, the page names no backend id or label; the access log does', async () => {
    for (const r of [
      await edgeRequest({ port: edge.ingress.port, host: HOST, path: '/offline', ca: edge.ingress.ca }),
      { ...(await h2Get(edge.ingress.port, HOST, '/offline', edge.ingress.ca)), text: '' },
    ]) {
      const body = 'body' in r && typeof r.body === 'string' ? r.body : r.text;
      expect(r.status).toBe(502);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_742');
      expect(body).toContain('ERR_SERVICE_742');
      for (const secret of [hiddenBackend, 'payments-internal', 'secret-tier', 'bkdtg_', 'tn_']) expect(body).not.toContain(secret);
    }
    await until(() => edge.s.logs.some((l) => l.includes('"msg":"ingress request"') && l.includes('ERR_SERVICE_742') && l.includes(hiddenBackend) && l.includes('team=payments-internal')), 5000);
  });
});
