// Event destinations and subscriptions, and delivery: `log` destinations readable over the
// API, `http` destinations POSTed to a local receiver (signed, in order, retried).
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, RFC3339, unknownId } from '../helpers/api.js';
import { receiver } from '../helpers/events.js';
import { eventually } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer({ delivery: { backoffMs: 50, maxBackoffMs: 200, pollMs: 100 } }); });
afterAll(async () => { await s.close(); });

const logDestination = async (extra: object = {}) => (await s.post('/event_destinations', { target: { log: {} }, ...extra })).body;
const subscribe = async (types: string[], destinationIds: string[]) => {
  const r = await s.post('/event_subscriptions', { sources: types.map((type) => ({ type })), destination_ids: destinationIds });
  expect(r.status, r.text).toBe(201);
  return r.body;
};

describe('event destinations', () => {
  it('full CRUD with a log target', async () => {
    const created = await s.post('/event_destinations', { description: 'audit', target: { log: {} } });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(id.startsWith('ed_')).toBe(true);
    expect(created.body).toEqual({
      id, uri: `${s.url}/event_destinations/${id}`, created_at: expect.stringMatching(RFC3339), description: 'audit', metadata: '', format: 'json', target: { http: null, log: {} },
    });
    expect((await s.get(`/event_destinations/${id}`)).body).toEqual(created.body);
    expect((await s.get('/event_destinations')).body.event_destinations.map((d: { id: string }) => d.id)).toContain(id);
    const patched = await s.patch(`/event_destinations/${id}`, { target: { http: { url: 'https://hooks.example.com/e' } } });
    expect(patched.body).toEqual({ ...created.body, target: { http: { url: 'https://hooks.example.com/e', secret: null }, log: null } });
    expect((await s.del(`/event_destinations/${id}`)).status).toBe(204);
    expectError(await s.get(`/event_destinations/${id}`), 404);
  });

  it('an http target\'s secret is write-only', async () => {
    const created = await s.post('/event_destinations', { target: { http: { url: 'https://hooks.example.com/x', secret: 'shh-secret-value' } } });
    expect(created.status).toBe(201);
    expect(created.body.target).toEqual({ http: { url: 'https://hooks.example.com/x', secret: null }, log: null });
    const got = await s.get(`/event_destinations/${created.body.id}`);
    expect(got.text).not.toContain('shh-secret-value');
    // PATCH of another field keeps the secret (it is merged, not dropped).
    await s.patch(`/event_destinations/${created.body.id}`, { description: 'still signed' });
    expect((await s.get(`/event_destinations/${created.body.id}`)).body.target.http.secret).toBeNull();
  });

  it.each([
    { reason: 'no target', body: {}, field: 'target' },
    { reason: 'an empty target', body: { target: {} }, field: 'target' },
    { reason: 'two targets', body: { target: { log: {}, http: { url: 'https://a.example/' } } }, field: 'target' },
    { reason: 'an unknown target', body: { target: { kinesis: {} } }, field: 'target.kinesis', code: 'ERR_SERVICE_102' as const },
    { reason: 'an http target without a url', body: { target: { http: {} } }, field: 'target.http.url' },
    { reason: 'a url that is not a URL', body: { target: { http: { url: 'not a url' } } }, field: 'target.http.url' },
    { reason: 'a format other than json', body: { format: 'xml', target: { log: {} } }, field: 'format' },
  ])('refuses $reason', async ({ body, field, code }) => {
    expectInvalid(await s.post('/event_destinations', body), field, code);
  });

  it('cannot be deleted while a subscription uses it (409); can once it is free', async () => {
    const d = await logDestination();
    const sub = await subscribe(['ip_policy_created.v0'], [d.id]);
    const r = await s.del(`/event_destinations/${d.id}`);
    const body = expectError(r, 409, 'ERR_SERVICE_321');
    expect(body.msg).toContain(sub.id);
    expect(body.details.referrers).toEqual([sub.id]);
    expect((await s.del(`/event_subscriptions/${sub.id}`)).status).toBe(204);
    expect((await s.del(`/event_destinations/${d.id}`)).status).toBe(204);
  });
});

describe('event subscriptions', () => {
  it('full CRUD; each source has its own uri that resolves', async () => {
    const d1 = await logDestination();
    const d2 = await logDestination();
    const created = await s.post('/event_subscriptions', {
      description: 'policy changes',
      sources: [{ type: 'ip_policy_created.v0' }, { type: 'ip_policy_deleted.v0' }],
      destination_ids: [d1.id, d2.id],
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    const uri = `${s.url}/event_subscriptions/${id}`;
    expect(created.body).toEqual({
      id, uri, created_at: expect.stringMatching(RFC3339), description: 'policy changes', metadata: '',
      sources: [{ type: 'ip_policy_created.v0', uri: `${uri}/sources/ip_policy_created.v0` }, { type: 'ip_policy_deleted.v0', uri: `${uri}/sources/ip_policy_deleted.v0` }],
      destinations: [{ id: d1.id, uri: d1.uri }, { id: d2.id, uri: d2.uri }],
    });
    for (const source of created.body.sources) {
      const r = await s.get(source.uri);
      expect(r.status).toBe(200);
      expect(r.body).toEqual(source);
    }
    expectError(await s.get(`${uri}/sources/ip_policy_updated.v0`), 404, 'ERR_SERVICE_300');
    expectError(await s.get(`/event_subscriptions/${unknownId('esb')}/sources/ip_policy_created.v0`), 404);
    expect((await s.get(`/event_subscriptions/${id}`)).body).toEqual(created.body);
    expect((await s.get('/event_subscriptions')).body.event_subscriptions[0]).toEqual(created.body);
    const patched = await s.patch(`/event_subscriptions/${id}`, { sources: [{ type: 'api_key_created.v0' }], destination_ids: [d2.id] });
    expect(patched.body).toEqual({
      ...created.body,
      sources: [{ type: 'api_key_created.v0', uri: `${uri}/sources/api_key_created.v0` }],
      destinations: [{ id: d2.id, uri: d2.uri }],
    });
    expect((await s.del(`/event_subscriptions/${id}`)).status).toBe(204);
    expectError(await s.get(`/event_subscriptions/${id}`), 404);
    expect((await s.del(`/event_destinations/${d1.id}`)).status).toBe(204);
  });

  it.each([
    { reason: 'no sources', body: { sources: [], destination_ids: ['DEST'] }, field: 'sources' },
    { reason: 'an unknown event type', body: { sources: [{ type: 'ip_policy_exploded.v0' }], destination_ids: ['DEST'] }, field: 'sources[0].type' },
    { reason: 'an event type of another version', body: { sources: [{ type: 'ip_policy_created.v1' }], destination_ids: ['DEST'] }, field: 'sources[0].type' },
    { reason: 'a type listed twice', body: { sources: [{ type: 'ip_policy_created.v0' }, { type: 'ip_policy_created.v0' }], destination_ids: ['DEST'] }, field: 'sources[1].type' },
    { reason: 'a source with a uri', body: { sources: [{ type: 'ip_policy_created.v0', uri: 'x' }], destination_ids: ['DEST'] }, field: 'sources[0].uri', code: 'ERR_SERVICE_102' as const },
    { reason: 'no destinations', body: { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [] }, field: 'destination_ids' },
    { reason: 'a destination that does not exist', body: { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [unknownId('ed')] }, field: 'destination_ids', code: 'ERR_SERVICE_107' as const },
    { reason: 'a destination id of another kind', body: { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [unknownId('ipp')] }, field: 'destination_ids[0]' },
  ])('refuses $reason', async ({ body, field, code }) => {
    const d = await logDestination();
    const withDest = JSON.parse(JSON.stringify(body).replace('"DEST"', JSON.stringify(d.id)));
    expectInvalid(await s.post('/event_subscriptions', withDest), field, code);
  });

  it('PATCH to a destination that does not exist: 400', async () => {
    const d = await logDestination();
    const sub = await subscribe(['ip_policy_created.v0'], [d.id]);
    expectInvalid(await s.patch(`/event_subscriptions/${sub.id}`, { destination_ids: [d.id, unknownId('ed')] }), 'destination_ids', 'ERR_SERVICE_107');
  });

  it.each([
    { reason: '255 emoji in the description (characters, not bytes)', field: 'description', value: '😀'.repeat(255), ok: true },
    { reason: '256 characters of description', field: 'description', value: 'é'.repeat(256), ok: false },
    { reason: '4096 two-byte characters of metadata', field: 'metadata', value: 'é'.repeat(4096), ok: true },
    { reason: '4097 characters of metadata', field: 'metadata', value: 'm'.repeat(4097), ok: false },
  ])('$reason: ok=$ok', async ({ field, value, ok }) => {
    const d = await logDestination();
    const r = await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [d.id], [field]: value });
    if (ok) expect(r.body[field]).toBe(value);
    else expect(expectInvalid(r, field).details.reason).toMatch(/characters/);
  });
});

describe('delivery to a log destination', () => {
  it('keeps each subscribed event, readable newest first with paging', async () => {
    const d = await logDestination();
    await subscribe(['ip_policy_created.v0', 'ip_policy_updated.v0', 'ip_policy_deleted.v0'], [d.id]);
    const p = (await s.post('/ip_policies', { description: 'watched' })).body;
    await s.patch(`/ip_policies/${p.id}`, { description: 'changed' });
    await s.del(`/ip_policies/${p.id}`);
    await s.post('/api_keys', {}); // not subscribed
    const r = await s.get(`/event_destinations/${d.id}/events`);
    expect(r.status).toBe(200);
    expect(r.body.uri).toBe(`${d.uri}/events`);
    expect(r.body.next_page_uri).toBeNull();
    const events = r.body.events;
    expect(events.map((e: { type: string }) => e.type)).toEqual(['ip_policy_deleted.v0', 'ip_policy_updated.v0', 'ip_policy_created.v0']);
    for (const e of events) {
      expect(e.id).toMatch(/^ev_[0-9A-Za-z]{27}$/);
      expect(e.created_at).toMatch(RFC3339);
      expect(e.object.id).toBe(p.id);
    }
    expect(events[2].object).toEqual({ ...p });
    expect(events[1].object.description).toBe('changed');
    const page1 = await s.get(`/event_destinations/${d.id}/events?limit=2`);
    expect(page1.body.events.map((e: { id: string }) => e.id)).toEqual(events.slice(0, 2).map((e: { id: string }) => e.id));
    expect(page1.body.next_page_uri).toBe(`${d.uri}/events?before_id=${events[1].id}&limit=2`);
    const page2 = await s.get(page1.body.next_page_uri);
    expect(page2.body.events.map((e: { id: string }) => e.id)).toEqual([events[2].id]);
    expect(page2.body.next_page_uri).toBeNull();
    expectInvalid(await s.get(`/event_destinations/${d.id}/events?before_id=${p.id}`), 'before_id', 'ERR_SERVICE_104');
  });

  it('deleting a policy emits a deleted event for each of its rules, then for the policy', async () => {
    const d = await logDestination();
    await subscribe(['ip_policy_deleted.v0', 'ip_policy_rule_deleted.v0'], [d.id]);
    const p = (await s.post('/ip_policies', {})).body;
    const r1 = (await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.0.0.0/8', action: 'allow' })).body;
    const r2 = (await s.post('/ip_policy_rules', { ip_policy_id: p.id, cidr: '10.1.0.0/16', action: 'deny' })).body;
    await s.del(`/ip_policies/${p.id}`);
    const events = (await s.get(`/event_destinations/${d.id}/events`)).body.events.reverse();
    expect(events.map((e: { type: string; object: { id: string } }) => [e.type, e.object.id])).toEqual([
      ['ip_policy_rule_deleted.v0', r2.id],
      ['ip_policy_rule_deleted.v0', r1.id],
      ['ip_policy_deleted.v0', p.id],
    ]);
    expect(events[0].object).toEqual(r2);
  });

  it('events never carry tokens or secrets', async () => {
    const d = await logDestination();
    await subscribe(['api_key_created.v0', 'credential_created.v0', 'event_destination_created.v0'], [d.id]);
    const key = await s.post('/api_keys', {});
    const cred = await s.post('/credentials', {});
    await s.post('/event_destinations', { target: { http: { url: 'https://x.example/', secret: 'dest-secret-123' } } });
    const text = (await s.get(`/event_destinations/${d.id}/events`)).text;
    for (const secret of [key.body.token, cred.body.token, 'dest-secret-123']) expect(text).not.toContain(secret);
    expect(JSON.parse(text).events).toHaveLength(3);
  });
});

describe('delivery to an http destination', () => {
  it('POSTs each event as JSON, signed with HMAC-SHA256 of the body', async () => {
    const rx = await receiver();
    try {
      const secret = 'signing-secret';
      const d = (await s.post('/event_destinations', { target: { http: { url: rx.url, secret } } })).body;
      // A PATCH that leaves the target alone keeps its (write-only) secret.
      await s.patch(`/event_destinations/${d.id}`, { description: 'signed' });
      await subscribe(['bot_user_created.v0'], [d.id]);
      const bot = (await s.post('/bot_users', { name: 'signed' })).body;
      const got = await eventually(async () => {
        expect(rx.received).toHaveLength(1);
        return rx.received[0];
      });
      expect(got.headers['content-type']).toBe('application/json');
      expect(got.headers['service-signature']).toBe(`sha256=${createHmac('sha256', secret).update(got.body).digest('hex')}`);
      expect(got.headers['service-event-type']).toBe('bot_user_created.v0');
      expect(got.headers['service-event-id']).toBe(got.json.id);
      expect(got.json).toEqual({ id: expect.stringMatching(/^ev_/), type: 'bot_user_created.v0', created_at: expect.stringMatching(RFC3339), object: bot });
      // A delivered event is listed too.
      const listed = await s.get(`/event_destinations/${d.id}/events`);
      expect(listed.body.events.map((e: { id: string }) => e.id)).toEqual([got.json.id]);
    } finally {
      await rx.close();
    }
  });

  it('sends no signature without a secret', async () => {
    const rx = await receiver();
    try {
      const d = (await s.post('/event_destinations', { target: { http: { url: rx.url } } })).body;
      await subscribe(['ip_policy_created.v0'], [d.id]);
      await s.post('/ip_policies', {});
      const got = await eventually(async () => rx.received[0] ?? Promise.reject(new Error('not yet')));
      expect(got.headers['service-signature']).toBeUndefined();
    } finally {
      await rx.close();
    }
  });

  it('retries a failing destination with backoff and keeps its events in order', async () => {
    // The first three attempts fail; every event must still arrive, once, in order.
    const rx = await receiver((n) => (n <= 3 ? 503 : 200));
    try {
      const d = (await s.post('/event_destinations', { target: { http: { url: rx.url } } })).body;
      await subscribe(['ip_policy_created.v0', 'ip_policy_updated.v0'], [d.id]);
      const created = [];
      for (let i = 0; i < 5; i++) {
        const p = (await s.post('/ip_policies', { description: `p${i}` })).body;
        await s.patch(`/ip_policies/${p.id}`, { description: `p${i}!` });
        created.push(p.id);
      }
      await eventually(async () => expect(rx.received).toHaveLength(10));
      expect(rx.attempts()).toBe(13);
      const seen = rx.received.map((r) => `${r.json.type.replace(/^ip_policy_|\.v0$/g, '')} ${r.json.object.description}`);
      expect(seen).toEqual(created.flatMap((_id, i) => [`created p${i}`, `updated p${i}!`]));
      expect(rx.received[0].headers['service-delivery-attempt']).toBe('4');
      expect(new Set(rx.received.map((r) => r.json.id)).size).toBe(10);
    } finally {
      await rx.close();
    }
  });

  it('a failing destination does not hold back another one', async () => {
    const down = await receiver(() => 500);
    const up = await receiver();
    try {
      const bad = (await s.post('/event_destinations', { target: { http: { url: down.url } } })).body;
      const good = (await s.post('/event_destinations', { target: { http: { url: up.url } } })).body;
      await subscribe(['credential_created.v0'], [bad.id, good.id]);
      await s.post('/credentials', {});
      await s.post('/credentials', {});
      await eventually(async () => expect(up.received).toHaveLength(2));
      await eventually(async () => expect(down.attempts()).toBeGreaterThanOrEqual(2));
      expect(down.received).toHaveLength(0);
      expect((await s.get(`/event_destinations/${bad.id}/events`)).body.events).toEqual([]);
      // Deleting the failing destination (after its subscription) drops what it still owed.
      const sub = (await s.get('/event_subscriptions?limit=1')).body.event_subscriptions[0];
      await s.del(`/event_subscriptions/${sub.id}`);
      expect((await s.del(`/event_destinations/${bad.id}`)).status).toBe(204);
    } finally {
      await down.close();
      await up.close();
    }
  });

  it('pending events survive a restart and are delivered after it', async () => {
    let accept = false;
    const rx = await receiver(() => (accept ? 200 : 503));
    try {
      const d = (await s.post('/event_destinations', { target: { http: { url: rx.url } } })).body;
      await subscribe(['bot_user_updated.v0'], [d.id]);
      const bot = (await s.post('/bot_users', { name: 'restart' })).body;
      await s.patch(`/bot_users/${bot.id}`, { name: 'restarted' });
      await eventually(async () => expect(rx.attempts()).toBeGreaterThanOrEqual(1));
      await s.restart();
      accept = true;
      await eventually(async () => expect(rx.received).toHaveLength(1));
      expect(rx.received[0].json.object.name).toBe('restarted');
    } finally {
      await rx.close();
    }
  });
});
