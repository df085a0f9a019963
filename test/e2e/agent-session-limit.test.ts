// One credential holds a bounded number of agent sessions (edgeform serve
// --agent-max-sessions-per-credential, EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL): past it the
// real agent is refused with 403 ERR_SERVICE_840 and exits 1 naming what to do, without
// retrying; another credential is unaffected, and a session that ends frees its place.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ERRORS } from '../../server/http/errors.js';
import { SLOT_SCOPE } from '../../server/gateway/live-rows.js';
import { credentialToken, fakeAgent, sessions, startAgent, validHello, type AgentProcess } from '../helpers/agent.js';
import { rawHttp } from '../helpers/raw-http.js';
import { api, killServers, serve } from '../helpers/serve.js';
import { startTestServer } from '../helpers/server.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'sessionlimit0123456789abcdefghijklmnopqrstuvwxy';
const running: AgentProcess[] = [];

afterEach(() => {
  for (const a of running.splice(0)) a.kill();
  killServers();
});
afterAll(removeTempDirs);

describe('agent sessions per credential', () => {
  it('past the limit the agent is refused with ERR_SERVICE_840 and exits 1 with a next step; another credential and a freed place are served', async () => {
    const s = await serve(['--data-dir', tempDir(), '--agent-max-sessions-per-credential', '2'], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await api(`${s.url}${path}`, TOKEN, method, body);
      return { status: r.status, body: r.status === 204 ? undefined : await r.json() as any };
    };
    const credential = async () => (await call('POST', '/credentials', {})).body as { id: string; token: string };
    const sessionsOf = async (id: string) => ((await call('GET', '/tunnel_sessions')).body.tunnel_sessions as any[]).filter((x) => x.credential.id === id);
    const agent = (token: string, label: string) => {
      const a = startAgent(['--api-url', s.url, '--authtoken', token, '--label', `app=${label}`, '--forwards-to', '127.0.0.1:1']);
      running.push(a);
      return a;
    };

    const one = await credential();
    const first = agent(one.token, 'a');
    const second = agent(one.token, 'b');
    await first.waitFor('online: tn_');
    await second.waitFor('online: tn_');
    expect(await sessionsOf(one.id)).toHaveLength(2);

    // The third is refused before the upgrade, in the API's error shape, and does not retry.
    const third = agent(one.token, 'c');
    expect(await third.exited).toBe(1);
    expect(third.stderr).toContain('ERR_SERVICE_840');
    expect(third.stderr).toContain(`the credential ${one.id} already holds 2 agent sessions`);
    expect(third.stderr).toMatch(/The agent does not retry: its credential has no session left\. Stop one of the credential's other agents/);
    expect(third.stderr).toContain('--agent-max-sessions-per-credential');
    expect(third.output()).not.toContain('retrying');
    expect(ERRORS.ERR_SERVICE_840.status).toBe(403);
    const upgrade = await rawHttp(s.url, `GET /_edgeform/agent HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: edgeform-agent/2\r\nService-Version: 2\r\nAuthorization: Bearer ${one.token}\r\n\r\n`);
    expect(upgrade.status, upgrade.head).toBe(403);
    expect(upgrade.body).toMatchObject({ error_code: 'ERR_SERVICE_840', status_code: 403, details: { limit: 2, operation_id: expect.stringMatching(/^op_/) } });
    expect(await sessionsOf(one.id)).toHaveLength(2);

    // Another credential has its own allowance.
    const other = await credential();
    await agent(other.token, 'd').waitFor('online: tn_');
    expect(await sessionsOf(other.id)).toHaveLength(1);

    // A stopped session frees its place at once: the next agent of the first credential is served.
    const [held] = await sessionsOf(one.id);
    expect((await call('POST', `/tunnel_sessions/${held.id}/stop`)).status).toBe(204);
    await until(async () => (await sessionsOf(one.id)).length === 1, 10_000, () => 'the stopped session stayed listed');
    const fourth = agent(one.token, 'e');
    await fourth.waitFor('online: tn_');
    expect(await sessionsOf(one.id)).toHaveLength(2);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });

  it('a session that loses the last place to another instance after its hello is closed with ERR_SERVICE_840, and nothing of it is stored', async () => {
    const s = await startTestServer({ agentMaxSessionsPerCredential: 1 });
    try {
      const cr = await credentialToken(s);
      // The place is free when the agent connects; another instance takes it while this one
      // waits for the hello (a row of its own in UniqueKey, standing in for that session).
      const fake = await fakeAgent(s.url, cr.token, async (path) => {
        if (path !== '/_edgeform/hello') return [204, undefined];
        await s.server.db.prisma.uniqueKey.create({ data: { scope: SLOT_SCOPE, value: `${cr.id}/0`, resourceId: cr.id } });
        return [200, validHello()];
      });
      await until(() => fake.seen.some((x) => x.path === '/_edgeform/closing'), 10_000, () => `no closing: ${JSON.stringify(fake.seen)}`);
      const closing = fake.seen.find((x) => x.path === '/_edgeform/closing')!.body;
      expect(closing.error_code).toBe('ERR_SERVICE_840');
      expect(closing.msg).toContain(`the credential ${cr.id} already holds 1 agent session, and the server allows at most 1 per credential`);
      expect(fake.seen.map((x) => x.path)).not.toContain('/_edgeform/bound');
      expect(await sessions(s)).toEqual([]);
      fake.close();
    } finally {
      await s.close();
    }
  });

  it('connections of one credential arriving together are counted one after the other: exactly the limit is upgraded', async () => {
    const s = await startTestServer({ agentMaxSessionsPerCredential: 2 });
    try {
      const cr = await credentialToken(s);
      const answer = (path: string): [number, unknown] => (path === '/_edgeform/hello' ? [200, validHello()] : [204, undefined]);
      const tries = await Promise.allSettled(Array.from({ length: 6 }, () => fakeAgent(s.url, cr.token, answer)));
      const upgraded = tries.filter((t) => t.status === 'fulfilled');
      const refused = tries.filter((t): t is PromiseRejectedResult => t.status === 'rejected');
      expect(upgraded).toHaveLength(2);
      expect(refused.map((r) => String(r.reason))).toEqual(Array(4).fill('Error: refused: 403'));
      await until(async () => (await sessions(s)).length === 2, 10_000, () => 'the two upgraded agents did not both become sessions');
      for (const t of upgraded) (t as PromiseFulfilledResult<Awaited<ReturnType<typeof fakeAgent>>>).value.close();
    } finally {
      await s.close();
    }
  });
});

