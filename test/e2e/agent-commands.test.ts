// restart, stop and update on live sessions: 204 only once the agent acknowledged; stop makes
// the agent exit 0, restart brings it back under a new session id, update fails with a
// distinct 409 for each of SPEC's four reasons, and an agent that never answers gives 504.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { expectError } from '../helpers/api.js';
import { agentTestHooks } from '../helpers/agent-hooks.js';
import { credentialToken, fakeAgent, sessions, validHello, type AgentProcess } from '../helpers/agent.js';
import { tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let token: string;
const start = agentTestHooks(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000, agentCommandTimeoutMs: 1500 });
  token = (await credentialToken(s)).token;
  return s;
});
const agent = (args: string[] = [], env: Record<string, string> = {}) =>
  start(['--api-url', s.url, '--authtoken', token, '--state-dir', tempDir('edgeform-agent-state-'), ...args, 'http', '3000'], env);
const sessionOf = async (a: AgentProcess) => {
  await a.waitFor('online: tn_');
  return [...a.output().matchAll(/session (ts_\w+) established/g)].at(-1)![1];
};


describe('stop', () => {
  it('204 once acknowledged; the agent exits 0 and its session disappears; then 404', async () => {
    const a = agent();
    const id = await sessionOf(a);
    expect((await s.post(`/tunnel_sessions/${id}/stop`, {})).status).toBe(204);
    expect(await a.exited).toBe(0);
    expect(a.output()).toContain('stopped by the stop command');
    await until(async () => (await s.get(`/tunnel_sessions/${id}`)).status === 404);
    expectError(await s.post(`/tunnel_sessions/${id}/stop`, {}), 404, 'ERR_SERVICE_300');
  });
});

describe('restart', () => {
  it('the agent re-executes itself and comes back under a new session id', async () => {
    const a = agent();
    const first = await sessionOf(a);
    expect((await s.post(`/tunnel_sessions/${first}/restart`, {})).status).toBe(204);
    await until(() => (a.output().match(/established/g) ?? []).length === 2, 20_000, a.output);
    const second = [...a.output().matchAll(/session (ts_\w+) established/g)][1][1];
    expect(second).not.toBe(first);
    await until(async () => (await sessions(s)).map((x) => x.id).join() === second);
    expect(a.output()).toContain('restarting');
    expect(a.child.exitCode).toBeNull();
    // SIGTERM to the process the user started reaches its successor: both end, the session goes.
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    await until(async () => (await sessions(s)).length === 0);
  });
});

describe('update', () => {
  it('no update available (same version): 409 ERR_SERVICE_322', async () => {
    const id = await sessionOf(agent());
    expectError(await s.post(`/tunnel_sessions/${id}/update`, {}), 409, 'ERR_SERVICE_322');
  });

  it('update checks disabled (--no-update-check): 409 ERR_SERVICE_323', async () => {
    const id = await sessionOf(agent(['--no-update-check'], { EDGEFORM_AGENT_VERSION: '0.0.1' }));
    expectError(await s.post(`/tunnel_sessions/${id}/update`, {}), 409, 'ERR_SERVICE_323');
  });

  it('an older agent downloads, verifies and stages the bundle; in progress 324, then updated-not-restarted 325; restart runs the new build', async () => {
    const a = agent([], { EDGEFORM_AGENT_VERSION: '0.0.1' });
    const id = await sessionOf(a);
    const [first, second] = await Promise.all([s.post(`/tunnel_sessions/${id}/update`, {}), s.post(`/tunnel_sessions/${id}/update`, {})]);
    const statuses = [first, second].map((r) => r.status).sort();
    expect(statuses).toEqual([204, 409]);
    expectError([first, second].find((r) => r.status === 409)!, 409, 'ERR_SERVICE_324');
    await a.waitFor('verified and staged');
    expectError(await s.post(`/tunnel_sessions/${id}/update`, {}), 409, 'ERR_SERVICE_325');
    expect((await s.post(`/tunnel_sessions/${id}/restart`, {})).status).toBe(204);
    await a.waitFor(/restarting into the staged update/);
    await until(async () => (await sessions(s)).some((x) => x.id !== id), 20_000, a.output);
    const [now] = await sessions(s);
    expect(now.agent_version).toBe(JSON.parse(fs.readFileSync('package.json', 'utf8')).version);
    // The new build is current: nothing newer to offer.
    expectError(await s.post(`/tunnel_sessions/${now.id}/update`, {}), 409, 'ERR_SERVICE_322');
  });
});

describe('an agent that does not answer', () => {
  it('504 with a code; the session stays', async () => {
    const fake = await fakeAgent(s.url, token, (p) => (p === '/_edgeform/hello' ? [200, validHello()] : p === '/_edgeform/bound' ? [204, undefined] : undefined));
    await until(async () => (await sessions(s)).length === 1);
    const [sess] = await sessions(s);
    expectError(await s.post(`/tunnel_sessions/${sess.id}/stop`, {}), 504, 'ERR_SERVICE_504');
    expect(fake.seen.map((x) => x.path)).toContain('/_edgeform/command');
    expect((await s.get(`/tunnel_sessions/${sess.id}`)).status).toBe(200);
    fake.close();
  });
});
