// A `log` event destination writes one JSON line per event to the server's log (never a
// secret), and still lists its events over the API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer({ delivery: { pollMs: 100 } }); });
afterAll(async () => { await s.close(); });

const eventLines = (destinationId: string) =>
  s.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'event' && l.destination_id === destinationId);

describe('a log event destination', () => {
  it('writes each event to the server log once, as JSON, without secrets, and lists it', async () => {
    const d = (await s.post('/event_destinations', { target: { log: {} } })).body;
    const sub = await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }, { type: 'event_destination_created.v0' }], destination_ids: [d.id] });
    expect(sub.status, sub.text).toBe(201);
    const policy = (await s.post('/ip_policies', { description: 'office' })).body;
    const secret = 'destination-secret-never-logged-7f3a';
    const hook = (await s.post('/event_destinations', { target: { http: { url: 'https://hooks.example.com/in', secret } } })).body;
    // Listed at once, as before.
    const listed = (await s.get(`/event_destinations/${d.id}/events`)).body.events;
    expect(listed.map((e: any) => e.object.id)).toEqual([hook.id, policy.id]);
    // Logged by the delivery worker after the commit: wait, bounded.
    const deadline = Date.now() + 10_000;
    while (eventLines(d.id).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const lines = eventLines(d.id);
    expect(lines.map((l) => l.event_type)).toEqual(['ip_policy_created.v0', 'event_destination_created.v0']);
    expect(lines[0]).toMatchObject({ level: 'info', event_id: listed[1].id, event: { id: listed[1].id, type: 'ip_policy_created.v0', object: { id: policy.id, description: 'office' } } });
    expect(lines[1].event.object.id).toBe(hook.id);
    expect(s.logs.join('\n')).not.toContain(secret);
    // Once each: another pass logs nothing again.
    await s.post('/ip_policies', { description: 'second' });
    while (eventLines(d.id).length < 3 && Date.now() < deadline + 5_000) await new Promise((r) => setTimeout(r, 50));
    expect(eventLines(d.id).map((l) => l.event.object.description)).toEqual(['office', '', 'second']);
  });
});
