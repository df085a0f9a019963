// The `edgeform` command as a real process (bin/edgeform.js), for what only a process has:
// its own exit code, streams and working directory, running beside another, signals, being
// killed. runCliProcess runs a command to its exit; startCli starts a long-running one
// (serve, agent, an apply the test interrupts) and waits on what it prints.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { CliResult } from './cli.js';

export const BIN = path.resolve(import.meta.dirname, '../../bin/edgeform.js');

/** Variables given as undefined are removed from the child's environment. */
export type Env = Record<string, string | undefined>;

export interface ProcessOptions {
  cwd?: string;
  /** Its own process group, so that kill() stops the processes it started too (the agent's successor). */
  detached?: boolean;
}

export interface CliProcess {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** Everything printed so far, both streams in the order it arrived. */
  output(): string;
  /** Resolves when the output so far (or the one stream named) matches (checked as it arrives; rejects after `ms` or on exit). */
  waitFor(pattern: RegExp | string, ms?: number, stream?: 'stdout' | 'stderr'): Promise<void>;
  /** The exit code (128 + n for a signal n, as a shell reports it). */
  exited: Promise<number>;
  /** A signal (SIGKILL unless named) to the process, or to its whole group when detached. */
  kill(signal?: NodeJS.Signals): void;
}

const SIGNALS: Record<string, number> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

export function startCli(args: string[], env: Env = {}, opts: ProcessOptions = {}): CliProcess {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, cwd: opts.cwd, detached: opts.detached, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let both = '';
  const watchers = new Set<() => void>();
  const seen = () => { for (const w of [...watchers]) w(); };
  child.stdout!.on('data', (d) => { stdout += d; both += d; seen(); });
  child.stderr!.on('data', (d) => { stderr += d; both += d; seen(); });
  let over = false;
  const exited = new Promise<number>((resolve) => child.on('close', (code, signal) => {
    over = true;
    resolve(code ?? 128 + (SIGNALS[signal ?? ''] ?? 0));
    seen();
  }));
  return {
    child,
    get stdout() { return stdout; },
    get stderr() { return stderr; },
    output: () => both,
    exited,
    waitFor(pattern, ms = 60_000, stream) {
      const matches = (text: string) => (typeof pattern === 'string' ? text.includes(pattern) : pattern.test(text));
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => done(new Error(`no ${pattern} within ${ms} ms:\n${stdout}\n${stderr}`)), ms);
        const done = (e?: Error) => {
          clearTimeout(timer);
          watchers.delete(check);
          if (e) reject(e);
          else resolve();
        };
        const check = () => {
          if (matches(stream === 'stdout' ? stdout : stream === 'stderr' ? stderr : both)) done();
          else if (over) done(new Error(`exited without ${pattern}:\n${stdout}\n${stderr}`));
        };
        watchers.add(check);
        check();
      });
    },
    kill(signal = 'SIGKILL') {
      try {
        if (opts.detached) process.kill(-child.pid!, signal);
        else child.kill(signal);
      } catch {
        /* already gone */
      }
    },
  };
}

/**
 * Runs `edgeform` to its exit, as a pipeline does. Asynchronous, so a test server in this
 * process keeps answering; killed (SIGKILL) after `timeoutMs` when given.
 */
export async function runCliProcess(args: string[], env: Env = {}, opts: ProcessOptions & { timeoutMs?: number } = {}): Promise<CliResult> {
  const p = startCli(args, env, opts);
  const timer = opts.timeoutMs ? setTimeout(() => p.kill(), opts.timeoutMs) : undefined;
  const code = await p.exited;
  clearTimeout(timer);
  return { code, stdout: p.stdout, stderr: p.stderr, json: () => JSON.parse(p.stdout) };
}
