// `edgeform serve` as a real process: started until its listening line, or run to its exit.
// The environment is cleared of every EDGEFORM_ setting the caller does not give.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const BIN = path.resolve('bin/edgeform.js');

const children: ChildProcess[] = [];
const dirs: string[] = [];

/** Kills every server a test left running (call from afterEach). */
export function killServers() {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/** A fresh folder, removed by removeTempDirs (call from afterAll). */
export function tempDir(prefix = 'edgeform-cli-'): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
}

export function removeTempDirs() {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
}

/** Every EDGEFORM_ variable of this process, emptied: a test's server sees only what it is given. */
const cleared = () => Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('EDGEFORM_')).map((k) => [k, '']));

export interface Serving {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  lines: () => any[];
  exited: Promise<number | null>;
  /** Resolves when stdout (or stderr) has matched the pattern. */
  waitFor(pattern: RegExp, stream?: 'stdout' | 'stderr'): Promise<void>;
}

function spawnServe(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { env: { ...process.env, ...cleared(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return child;
}

/** Spawns `edgeform serve --port 0 ...` and waits for its listening line. */
export async function serve(args: string[], env: Record<string, string> = {}): Promise<Serving> {
  const child = spawnServe(['--port', '0', ...args], env);
  let out = '';
  let err = '';
  const waiters: { pattern: RegExp; stream: 'stdout' | 'stderr'; resolve: () => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) if (w.pattern.test(w.stream === 'stdout' ? out : err)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); }
  };
  child.stdout!.on('data', (c) => { out += c; check(); });
  child.stderr!.on('data', (c) => { err += c; check(); });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const waitFor = (pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout') =>
    new Promise<void>((resolve, reject) => {
      waiters.push({ pattern, stream, resolve });
      check();
      void exited.then((code) => reject(new Error(`serve exited (${code}) before ${pattern}:\n${out}\n${err}`)));
    });
  await waitFor(/edgeform listening on/);
  const lines = () => out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const url = lines().find((l) => /listening/.test(l.msg)).url as string;
  return { child, url, stdout: () => out, stderr: () => err, lines, exited, waitFor };
}

/** Runs serve to its exit (asynchronous: the test's own listeners must keep answering); killed after 30 s. */
export function serveToExit(args: string[], env: Record<string, string> = {}) {
  const child = spawnServe(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c) => { stdout += c; });
  child.stderr!.on('data', (c) => { stderr += c; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); }),
  );
}

/** An API call with a bearer token and the version header. */
export const api = (url: string, token: string, method = 'GET', body?: unknown) =>
  fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, 'service-version': '2', ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
