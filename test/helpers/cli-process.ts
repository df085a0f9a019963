// The `edgeform` command as a real process (bin/edgeform.js), for what only a process
// has: running beside another, signals, being killed.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const BIN = path.resolve(import.meta.dirname, '../../bin/edgeform.js');

export interface CliProcess {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves when the output so far matches (checked as it arrives; rejects after `ms` or on exit). */
  waitFor(pattern: RegExp, ms?: number): Promise<void>;
  /** The exit code (128 + n for a signal n, as a shell reports it). */
  exited: Promise<number>;
}

const SIGNALS: Record<string, number> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

export function startCli(args: string[], env: Record<string, string>): CliProcess {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  const seen = () => { for (const w of [...watchers]) w(); };
  child.stdout!.on('data', (d) => { stdout += d; seen(); });
  child.stderr!.on('data', (d) => { stderr += d; seen(); });
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
    exited,
    waitFor(pattern, ms = 60_000) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => done(new Error(`no ${pattern} within ${ms} ms:\n${stdout}\n${stderr}`)), ms);
        const done = (e?: Error) => {
          clearTimeout(timer);
          watchers.delete(check);
          if (e) reject(e);
          else resolve();
        };
        const check = () => {
          if (pattern.test(stdout + stderr)) done();
          else if (over) done(new Error(`exited without ${pattern}:\n${stdout}\n${stderr}`));
        };
        watchers.add(check);
        check();
      });
    },
  };
}
