// An explicit hostname is held by one tunnel session at a time: a second agent asking for it
// is refused (409 ERR_SERVICE_320, on the agent's side, the rest of its session stays up)
// while the first holds it, and gets it once the first session has gone. The claim is a
// UniqueKey row, so it holds across instances too (agent-postgres.test.ts).
import { describe, expect, it } from 'vitest';
import { agentTestHooks } from '../helpers/agent-hooks.js';
import { agentConfigFile, credentialToken, hostnameConfig, sessions, tunnels } from '../helpers/agent.js';
import { until } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
const agent = agentTestHooks(async () => (s = await startTestServer({ agentHeartbeatMs: 1000 })));


const urlsOf = async () => (await tunnels(s)).map((t) => t.public_url).sort();

describe('an explicit hostname', () => {
  it('a second agent is refused while the first holds it, and gets it once the first has gone', async () => {
    const cr = await credentialToken(s);
    const first = agent(['--config', hostnameConfig('shop.example.com'), '--api-url', s.url, '--authtoken', cr.token]);
    await first.waitFor('online: tn_');
    const [held] = await tunnels(s);
    // The second agent also has a labeled tunnel: its session stays up for it.
    const file = agentConfigFile(`tunnels:
  site: { proto: https, addr: 1, hostname: SHOP.example.com }
  web: { labels: { app: second }, forwards_to: 127.0.0.1:1 }
`);
    const second = agent(['--config', file, '--api-url', s.url, '--authtoken', cr.token]);
    await second.waitFor('tunnel "site" refused');
    expect(second.output()).toMatch(/tunnel "site" refused: .*shop\.example\.com is already served by tunnel tn_\w+ of tunnel session ts_\w+.*\(ERR_SERVICE_320\)/);
    expect(second.output()).toContain(held.id);
    await second.waitFor('tunnel "web" online');
    expect(await urlsOf()).toEqual(['http://shop.example.com', undefined]);
    expect((await s.get('/endpoints')).body.endpoints.map((e: any) => e.public_url)).toEqual(['http://shop.example.com']);
    expect(await sessions(s)).toHaveLength(2);

    // The first session goes (its agent stopped): the hostname is free for the next agent.
    const [firstSession] = (await sessions(s)).filter((x) => x.id === held.tunnel_session.id);
    expect((await s.post(`/tunnel_sessions/${firstSession.id}/stop`, {})).status).toBe(204);
    expect(await first.exited).toBe(0);
    const third = agent(['--config', hostnameConfig('shop.example.com'), '--api-url', s.url, '--authtoken', cr.token]);
    await third.waitFor('online: tn_');
    expect(third.output()).not.toMatch(/refused/);
    expect(await urlsOf()).toEqual(['http://shop.example.com', undefined]);
  });

  it('a killed agent frees it too (kill -9: within the heartbeat interval)', async () => {
    const cr = await credentialToken(s);
    const first = agent(['--config', hostnameConfig('gone.example.com'), '--api-url', s.url, '--authtoken', cr.token]);
    await first.waitFor('online: tn_');
    first.kill('SIGKILL');
    await until(async () => (await sessions(s)).length === 0);
    const next = agent(['--config', hostnameConfig('gone.example.com'), '--api-url', s.url, '--authtoken', cr.token]);
    await next.waitFor('online: tn_');
    expect(await urlsOf()).toEqual(['http://gone.example.com']);
  });

  it('two tunnels of one session on one hostname: the second is refused', async () => {
    const cr = await credentialToken(s);
    const file = agentConfigFile(`tunnels:
  plain: { proto: http, addr: 1, hostname: twice.example.com }
  secure: { proto: https, addr: 2, hostname: twice.example.com }
  tls: { proto: tls, addr: 3, hostname: other.example.com }
`);
    const a = agent(['--config', file, '--api-url', s.url, '--authtoken', cr.token]);
    await a.waitFor('tunnel "secure" refused');
    expect(a.output()).toMatch(/tunnel "secure" refused: .*twice\.example\.com is already served by this session's tunnel tn_\w+.*ERR_SERVICE_320/);
    await until(async () => (await tunnels(s)).length === 2);
    expect(await urlsOf()).toEqual(['http://twice.example.com', 'tls://other.example.com']);
  });

  it('agents asking for one hostname at the same moment: exactly one gets it', async () => {
    const cr = await credentialToken(s);
    const racers = Array.from({ length: 4 }, () => agent(['--config', hostnameConfig('race.example.com'), '--api-url', s.url, '--authtoken', cr.token]));
    await until(() => racers.every((r) => /online: tn_|refused/.test(r.output())), 20_000, () => racers.map((r) => r.output()).join('\n'));
    expect(racers.filter((r) => /online: tn_/.test(r.output()))).toHaveLength(1);
    expect(racers.filter((r) => /refused: .*ERR_SERVICE_320/.test(r.output()))).toHaveLength(3);
    expect(await urlsOf()).toEqual(['http://race.example.com']);
  });
});
