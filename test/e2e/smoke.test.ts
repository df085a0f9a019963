import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

describe('server smoke', () => {
  it('creates, reads, lists and deletes an IP policy', async () => {
    const created = await s.post('/ip_policies', { description: 'office' });
    expect(created.status).toBe(201);
    expect(created.body.id).toMatch(/^ipp_[0-9A-Za-z]{27}$/);
    expect(created.body.uri).toBe(`${s.url}/ip_policies/${created.body.id}`);
    const got = await s.get(`/ip_policies/${created.body.id}`);
    expect(got.body).toEqual(created.body);
    const list = await s.get('/ip_policies');
    expect(list.body.ip_policies.map((p: { id: string }) => p.id)).toContain(created.body.id);
    expect((await s.del(`/ip_policies/${created.body.id}`)).status).toBe(204);
    expect((await s.get(`/ip_policies/${created.body.id}`)).status).toBe(404);
  });
});
