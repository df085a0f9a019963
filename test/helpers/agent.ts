// Runs `edgeform agent` as a child process, as a user would, and waits on what it and the
// server say. Each agent is its own process group, so a restarted agent (which starts its
// successor as a child) is stopped whole.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestServer } from './server.js';

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'edgeform.js');

export interface AgentProcess {
  child: ChildProcess;
  /** Everything printed so far (stdout and stderr). */
  output(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /** SIGKILL to the whole process group. */
  kill(signal?: NodeJS.Signals): void;
}

export function startAgent(args: string[], env: Record<string, string | undefined> = {}, bin = BIN): AgentProcess {
  const child = spawn(process.execPath, [bin, 'agent', ...args], {
    env: { ...process.env, EDGEFORM_AUTHTOKEN: undefined, EDGEFORM_API_URL: undefined, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (c) => { out += c; });
  child.stderr!.on('data', (c) => { out += c; });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    output: () => out,
    exited,
    waitFor: (text, timeoutMs = 20_000) => until(() => (typeof text === 'string' ? out.includes(text) : text.test(out)), timeoutMs, () => `agent output never showed ${text}:\n${out}`),
    kill(signal = 'SIGKILL') {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        /* already gone */
      }
    },
  };
}

/** Polls `check` every 50 ms until it holds; throws `why()` after `timeoutMs`. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 20_000, why: () => string = () => 'condition never held'): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(why());
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Online sessions (all of them, first page). */
export async function sessions(s: TestServer): Promise<any[]> {
  return (await s.get('/tunnel_sessions')).body.tunnel_sessions;
}

export async function tunnels(s: TestServer): Promise<any[]> {
  return (await s.get('/tunnels')).body.tunnels;
}

/** A credential's token (acl as given). */
export async function credentialToken(s: TestServer, acl: string[] = [], ownerId?: string): Promise<{ id: string; token: string }> {
  const r = await s.post('/credentials', { acl, ...(ownerId ? { owner_id: ownerId } : {}) });
  if (r.status !== 201) throw new Error(r.text);
  return { id: r.body.id, token: r.body.token };
}
