// The routing table under change, on a real server over real sockets: API writes apply the
// rows they touched (a request meanwhile finds every other edge, and a write is live on the
// next request), an IP rule added or deleted is live on the next request, and an agent's
// connect and disconnect change nothing in the table (no new version).
import https from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent } from '../helpers/agent.js';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { addressKey, IpRuleSetBuilder } from '../../server/ingress/ip-rules.js';
import { loadRules } from '../../server/ingress/table.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let port: number;
let ca: string;
const EDGES = 20;

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
  port = ingressPort(s, 443);
  ca = localCa(s);
  for (let i = 0; i < EDGES; i++) {
    const b = await s.post('/backends/http_response', { body: `edge ${i}`, status_code: 200 });
    const e = await s.post('/edges/https', { hostports: [`e${i}.example.com:443`] });
    await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.body.id } });
  }
}, 60_000);

afterAll(async () => {
  await s?.close();
});

const version = () => s.server.ingress!.table.now.version;

describe('changes applied while requests run', () => {
  it('no request to an unchanged edge misses it while other edges are created, changed and deleted, and each write is live on the next request', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 4 });
    let stop = false;
    const statuses: number[] = [];
    const load = (async () => {
      for (let n = 0; !stop; n++) {
        const i = n % EDGES;
        const r = await edgeRequest({ port, host: `e${i}.example.com`, ca, agent });
        statuses.push(r.status);
        if (r.text !== `edge ${i}`) throw new Error(`edge ${i} answered ${r.status} ${r.text}`);
      }
    })();
    const b = await s.post('/backends/http_response', { body: 'churn', status_code: 200 });
    for (let k = 0; k < 15; k++) {
      const e = await s.post('/edges/https', { hostports: [`churn${k}.example.com:443`] });
      const route = await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.body.id } });
      expect((await edgeRequest({ port, host: `churn${k}.example.com`, ca })).text).toBe('churn');
      await s.patch(`/edges/https/${e.body.id}/routes/${route.body.id}`, { match: '/moved' });
      expect((await edgeRequest({ port, host: `churn${k}.example.com`, ca })).status).toBe(404);
      expect((await edgeRequest({ port, host: `churn${k}.example.com`, path: '/moved', ca })).text).toBe('churn');
      await s.del(`/edges/https/${e.body.id}`);
      expect((await edgeRequest({ port, host: `churn${k}.example.com`, path: '/moved', ca })).status).toBe(404);
    }
    stop = true;
    await load;
    agent.destroy();
    expect(statuses.length).toBeGreaterThan(EDGES);
    expect(new Set(statuses)).toEqual(new Set([200]));
  });

  it('an IP rule added or deleted is live on the next request', async () => {
    const b = await s.post('/backends/http_response', { body: 'guarded', status_code: 200 });
    const policy = await s.post('/ip_policies', {});
    for (let i = 0; i < 40; i++) await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: `10.${i}.0.0/16`, action: 'deny' });
    const e = await s.post('/edges/https', { hostports: ['guarded.example.com:443'] });
    await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.body.id }, ip_restriction: { ip_policy_ids: [policy.body.id] } });
    const get = async () => (await edgeRequest({ port, host: 'guarded.example.com', ca })).status;
    expect(await get()).toBe(200);
    const deny = await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: '127.0.0.0/8', action: 'deny' });
    expect(await get()).toBe(403);
    // A rule written again (its description) is applied again, once.
    expect((await s.patch(`/ip_policy_rules/${deny.body.id}`, { description: 'loopback' })).status).toBe(200);
    expect(await get()).toBe(403);
    await s.del(`/ip_policy_rules/${deny.body.id}`);
    expect(await get()).toBe(200);
    const allowOther = await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: '192.0.2.0/24', action: 'allow' });
    expect(await get()).toBe(403);
    await s.del(`/ip_policy_rules/${allowOther.body.id}`);
    expect(await get()).toBe(200);
    await s.post('/ip_policy_rules', { ip_policy_id: policy.body.id, cidr: '127.0.0.1/32', action: 'deny' });
    expect(await get()).toBe(403);
    await s.del(`/ip_policies/${policy.body.id}`);
    expect(await get()).toBe(200);
  });
});

describe('a restart', () => {
  it('reads the IP rules back (in batches, CIDR and action only) and they guard as before', async () => {
    const b = await s.post('/backends/http_response', { body: 'kept', status_code: 200 });
    const deny = await s.post('/ip_policies', {});
    await s.post('/ip_policy_rules', { ip_policy_id: deny.body.id, cidr: '2001:db8::/32', action: 'deny' });
    await s.post('/ip_policy_rules', { ip_policy_id: deny.body.id, cidr: '127.0.0.1/32', action: 'deny' });
    const others = await s.post('/ip_policies', {});
    await s.post('/ip_policy_rules', { ip_policy_id: others.body.id, cidr: '192.0.2.0/24', action: 'deny', description: 'not "cidr":"0.0.0.0/0"' });
    for (const [host, policy] of [['denied', deny.body.id], ['open', others.body.id]]) {
      const e = await s.post('/edges/https', { hostports: [`${host}.example.com:443`] });
      await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.body.id }, ip_restriction: { ip_policy_ids: [policy] } });
    }
    await s.restart();
    port = ingressPort(s, 443);
    expect((await edgeRequest({ port, host: 'denied.example.com', ca })).status).toBe(403);
    expect((await edgeRequest({ port, host: 'open.example.com', ca })).text).toBe('kept');
    // One policy's rules read again (what the table does when two rule ids share their hashes).
    const asked: string[] = [];
    const b1 = new IpRuleSetBuilder();
    expect(await loadRules({ db: s.server.db } as never, (policyId) => { asked.push(policyId); return b1; }, deny.body.id)).toBe(2);
    expect(new Set(asked)).toEqual(new Set([deny.body.id]));
    const set = b1.build();
    expect(set.size).toBe(2);
    expect(set.holds(addressKey('127.0.0.1')!, 'deny')).toBe(true);
    expect(set.holds(addressKey('2001:db8::1')!, 'deny')).toBe(true);
    expect(set.holds(addressKey('192.0.2.1')!, 'deny')).toBe(false);
  });
});

describe('agents', () => {
  it('an agent connecting and leaving changes nothing in the routing table (no new version)', async () => {
    const cr = await credentialToken(s);
    const before = version();
    const a = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=none', '--forwards-to', '127.0.0.1:1']);
    await a.waitFor('online: tn_');
    a.kill();
    await a.exited;
    const deadline = Date.now() + 15_000;
    while ((await s.get('/tunnel_sessions')).body.tunnel_sessions.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect((await s.get('/tunnel_sessions')).body.tunnel_sessions).toEqual([]);
    expect(version()).toBe(before);
  });
});
