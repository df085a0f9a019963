// Tunnel sessions and tunnels: read-only views of what agents create. With no agent
// connected the lists are empty and every id is unknown (agents: agent-*.test.ts; the
// endpoints collection, where agents' endpoints are listed with cloud ones: endpoints.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, unknownId } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

describe.each([
  { path: '/tunnel_sessions', envelope: 'tunnel_sessions', prefix: 'ts' },
  { path: '/tunnels', envelope: 'tunnels', prefix: 'tn' },
])('$path', ({ path, envelope, prefix }) => {
  it('lists in its envelope', async () => {
    const r = await s.get(path);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ [envelope]: [], uri: `${s.url}${path}`, next_page_uri: null });
    expect((await s.get(`${path}?limit=5&before_id=${unknownId(prefix)}`)).status).toBe(200);
  });

  it('an unknown id: 404; an id of another collection: 400', async () => {
    expectError(await s.get(`${path}/${unknownId(prefix)}`), 404, 'ERR_SERVICE_300');
    expectError(await s.get(`${path}/${unknownId('ipp')}`), 400, 'ERR_SERVICE_105');
    expectError(await s.get(`${path}?before_id=${unknownId('ipp')}`), 400, 'ERR_SERVICE_104');
  });

  it('is read-only: 405 with Allow: GET', async () => {
    for (const [method, at] of [['POST', path], ['PATCH', `${path}/${unknownId(prefix)}`], ['DELETE', `${path}/${unknownId(prefix)}`]]) {
      const r = await s.request(method, at, method === 'DELETE' ? undefined : {});
      expectError(r, 405, 'ERR_SERVICE_310');
      expect(r.headers.get('allow')).toBe('GET');
    }
  });
});

describe('agent commands', () => {
  it.each(['restart', 'stop', 'update'])('%s to a session that is not online: 404, whatever the body', async (action) => {
    for (const body of [{}, { force: true }]) expectError(await s.post(`/tunnel_sessions/${unknownId('ts')}/${action}`, body), 404, 'ERR_SERVICE_300');
    expectError(await s.post(`/tunnel_sessions/${unknownId('tn')}/${action}`, {}), 400, 'ERR_SERVICE_105');
  });
});
