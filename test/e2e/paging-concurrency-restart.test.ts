// Newest-first paging over many items, concurrent creates, and a restart on the same
// database file keeping every resource and every token.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type Reply, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

describe('paging', () => {
  it('visits each of 250 IP policies exactly once, newest first, with absolute next_page_uri', async () => {
    const created: string[] = [];
    for (let i = 0; i < 250; i++) created.push((await s.post('/ip_policies', { description: `p${i}` })).body.id);
    const seen: string[] = [];
    const pages: number[] = [];
    let next: string | null = `${s.url}/ip_policies?limit=100`;
    while (next) {
      const r: Reply = await s.get(next);
      expect(r.status).toBe(200);
      expect(r.body.uri).toBe(`${s.url}/ip_policies`);
      const ids = r.body.ip_policies.map((p: { id: string }) => p.id);
      pages.push(ids.length);
      seen.push(...ids);
      next = r.body.next_page_uri;
      if (next) {
        expect(next).toBe(`${s.url}/ip_policies?before_id=${ids.at(-1)}&limit=100`);
      }
    }
    expect(pages).toEqual([100, 100, 50]);
    expect(seen).toEqual([...created].reverse());
    expect(new Set(seen).size).toBe(250);
    expect([...seen].sort().reverse()).toEqual(seen);
  });

  it('a page that ends exactly at the last item has no next page', async () => {
    const fresh = await startTestServer();
    try {
      for (let i = 0; i < 4; i++) await fresh.post('/bot_users', { name: `b${i}` });
      const first = await fresh.get('/bot_users?limit=2');
      const second = await fresh.get(first.body.next_page_uri);
      expect(second.body.bot_users).toHaveLength(2);
      expect(second.body.next_page_uri).toBeNull();
    } finally {
      await fresh.close();
    }
  });

  it('defaults to 100 per page', async () => {
    const r = await s.get('/ip_policies');
    expect(r.body.ip_policies).toHaveLength(100);
    expect(r.body.next_page_uri).toMatch(/limit=100$/);
  });
});

describe('concurrency', () => {
  it('50 concurrent creates all succeed with distinct ids', async () => {
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => s.post('/ip_policies', { description: `c${i}` })));
    for (const r of replies) expect(r.status, r.text).toBe(201);
    const ids = new Set(replies.map((r) => r.body.id));
    expect(ids.size).toBe(50);
    const listed = new Set<string>();
    for (let next: string | null = '/ip_policies'; next; ) {
      const r: Reply = await s.get(next);
      for (const p of r.body.ip_policies) listed.add(p.id);
      next = r.body.next_page_uri;
    }
    for (const id of ids) expect(listed.has(id)).toBe(true);
  });

  it('50 concurrent rules with the same CIDR in one policy: exactly one wins, the rest are 409', async () => {
    const p = (await s.post('/ip_policies', {})).body;
    const replies = await Promise.all(Array.from({ length: 50 }, () => s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.0.0.0/8', action: 'allow' })));
    expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of replies.filter((x) => x.status !== 201)) {
      expect(r.status).toBe(409);
      expect(r.body.error_code).toBe('ERR_SERVICE_320');
    }
  });
});

describe('restart', () => {
  it('keeps every resource, and the same tokens keep working', async () => {
    const bot = await s.post('/bot_users', { name: 'survivor' });
    const key = await s.post('/api_keys', { owner_id: bot.body.id, description: 'kept' });
    const cred = await s.post('/credentials', { acl: ['bind:a.example.com'] });
    const policy = await s.post('/ip_policies', { description: 'kept' });
    const rule = await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: '2001:db8::/32', action: 'deny' });
    const dest = await s.post('/event_destinations', { target: { http: { url: 'https://hooks.example.com/a', secret: 'kept-secret' } } });
    const sub = await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [dest.body.id] });
    const paths = [
      `/bot_users/${bot.body.id}`, `/api_keys/${key.body.id}`, `/credentials/${cred.body.id}`, `/ip_policies/${policy.body.id}`,
      `/ip_policy_rules/${rule.body.id}`, `/event_destinations/${dest.body.id}`, `/event_subscriptions/${sub.body.id}`, `/users/${s.server.bootstrap.userId}`,
    ];
    const before = await Promise.all(paths.map(async (p) => (await s.get(p)).body));
    const listBefore = (await s.get('/ip_policies?limit=100')).body;
    await s.restart();
    expect(s.server.bootstrap.created).toBe(false);
    expect(s.server.db.migrated).toEqual([]);
    const after = await Promise.all(paths.map(async (p) => (await s.get(p)).body));
    expect(after).toEqual(before);
    expect((await s.get('/ip_policies?limit=100')).body).toEqual(listBefore);
    expect((await s.get('/ip_policies', { token: key.body.token })).status).toBe(200);
    expect((await s.get('/ip_policies', { token: s.token })).status).toBe(200);
    // Uniqueness and references survive too.
    expect((await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: '2001:db8::/32', action: 'deny' })).status).toBe(409);
    expect((await s.del(`/event_destinations/${dest.body.id}`)).status).toBe(409);
  });
});

describe('migrations', () => {
  it('are recorded once; a recorded migration whose file changed stops the start with a message', async () => {
    const fresh = await startTestServer();
    try {
      const applied = fresh.server.db.migrated;
      expect(applied.length).toBeGreaterThan(0);
      const rows = await fresh.server.db.prisma.$queryRawUnsafe<{ name: string }[]>('SELECT name FROM _edgeform_migrations ORDER BY name');
      expect(rows.map((r) => r.name)).toEqual(applied);
      await fresh.server.db.prisma.$executeRawUnsafe(`UPDATE _edgeform_migrations SET checksum = 'edited' WHERE name = '${applied[0]}'`);
      await expect(fresh.restart()).rejects.toThrow(`migration ${applied[0]} was applied with different contents`);
    } finally {
      await fresh.close().catch(() => {});
      fs.rmSync(fresh.dir, { recursive: true, force: true });
    }
  });
});
