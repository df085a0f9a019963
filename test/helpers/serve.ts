// `edgeform serve` as a real process (test/helpers/cli-process.ts): started until its
// listening line, or run to its exit.
// The environment is cleared of every EDGEFORM_ setting the caller does not give.
import type { ChildProcess } from 'node:child_process';
import { runCliProcess, startCli } from './cli-process.js';

const children: ChildProcess[] = [];

/** Kills every server a test left running (call from afterEach). */
export function killServers() {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/** Every EDGEFORM_ variable of this process, emptied: a test's server sees only what it is given. */
const cleared = () => Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('EDGEFORM_')).map((k) => [k, '']));

export interface Serving {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  lines: () => any[];
  exited: Promise<number>;
  /** Resolves when stdout (or stderr) has matched the pattern. */
  waitFor(pattern: RegExp, stream?: 'stdout' | 'stderr'): Promise<void>;
}

/**
 * The tests written before `--workers` (issue 34) look at one process (its log, its metrics,
 * its memory): one process is the default, and they say so explicitly, so that an
 * EDGEFORM_WORKERS in the environment running the tests does not change them. A test of
 * workers passes `--workers N` (or EDGEFORM_WORKERS in `env`), which wins over this. To run
 * existing tests against workers, EDGEFORM_TEST_WORKERS=N in the environment running them
 * starts every server of theirs with N: `EDGEFORM_TEST_WORKERS=2 npx vitest run test/e2e/x.test.ts`.
 */
const ONE_PROCESS = { EDGEFORM_WORKERS: process.env.EDGEFORM_TEST_WORKERS || '1' };

/** Spawns `edgeform serve --port 0 ...` and waits for its listening line. */
export async function serve(args: string[], env: Record<string, string> = {}): Promise<Serving> {
  const p = startCli(['serve', '--port', '0', ...args], { ...cleared(), ...ONE_PROCESS, ...env });
  children.push(p.child);
  const waitFor = (pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout') => p.waitFor(pattern, undefined, stream);
  await waitFor(/edgeform listening on/);
  const lines = () => p.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const url = lines().find((l) => /listening/.test(l.msg)).url as string;
  return { child: p.child, url, stdout: () => p.stdout, stderr: () => p.stderr, lines, exited: p.exited, waitFor };
}

/** Runs serve to its exit (asynchronous: the test's own listeners must keep answering); killed after 30 s. */
export const serveToExit = (args: string[], env: Record<string, string> = {}) =>
  runCliProcess(['serve', ...args], { ...cleared(), ...ONE_PROCESS, ...env }, { timeoutMs: 30_000 });

/** An API call with a bearer token and the version header. */
export const api = (url: string, token: string, method = 'GET', body?: unknown) =>
  fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, 'service-version': '2', ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
