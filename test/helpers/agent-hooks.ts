// The hooks of a test file that runs agents against one server. Apart from ./agent.ts, which
// child processes started by tests (gateway-process.ts) import, and which must therefore not
// import vitest.
import { afterAll, afterEach, beforeAll } from 'vitest';
import { sessions, startAgent, type AgentProcess } from './agent.js';
import type { TestServer } from './server.js';
import { removeTempDirs } from './temp.js';
import { until } from './wait.js';

/**
 * The hooks of a test file whose tests run agents against one server: `start` makes the server
 * before all tests; after each test every agent started through the returned function is
 * killed and the test waits until the server lists no session; after all, the server is
 * closed and the temporary folders removed.
 */
export function agentTestHooks(start: () => Promise<TestServer>): (args: string[], env?: Record<string, string | undefined>) => AgentProcess {
  let server: TestServer | undefined;
  const running: AgentProcess[] = [];
  beforeAll(async () => { server = await start(); });
  afterEach(async () => {
    for (const a of running.splice(0)) a.kill();
    await until(async () => (await sessions(server!)).length === 0, 10_000, () => 'sessions of killed agents stayed listed');
  });
  afterAll(async () => {
    await server?.close();
    removeTempDirs();
  });
  return (args, env = {}) => {
    const a = startAgent(args, env);
    running.push(a);
    return a;
  };
}
