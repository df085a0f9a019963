// Runs the `edgeform` command in-process with captured output, as a user would run it.
import fs from 'node:fs';
import path from 'node:path';
import { main } from '../../bin/cli.js';
import type { Io } from '../../bin/reconcile.js';
import { plain } from '../../reconciler/render/text.js';
import { tempDir } from './temp.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (for --json runs). */
  json(): any;
}

/** `io` overrides parts of the captured streams' settings (e.g. `stillEvery`). */
export async function runCli(args: string[], env: Record<string, string | undefined> = {}, answer?: string, io: Partial<Io> = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const captured: Io = {
    ...io,
    out: (t) => { stdout += t; },
    err: (t) => { stderr += t; },
    outStyle: plain,
    errStyle: plain,
    ask: answer === undefined ? undefined : async () => answer,
  };
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    const code = await main(['node', 'edgeform', ...args], captured);
    return { code, stdout, stderr, json: () => JSON.parse(stdout) };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** Writes manifest files into a fresh directory; returns its path. */
export function manifestDir(files: Record<string, string>): string {
  const dir = tempDir('edgeform-manifests-');
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}
