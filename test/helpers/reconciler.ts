// Running the reconciler's commands against a test server, as a user would, keeping every
// output so a test can check afterwards that no secret ever appeared in one.
import path from 'node:path';
import { runCli, type CliResult } from './cli.js';
import type { TestServer } from './server.js';

/** The example manifest (the README's quick start); its secret comes from GH_SECRET. */
export const QUICKSTART = path.resolve(import.meta.dirname, '../../examples/manifests/quickstart');

export interface StackRunner {
  env: Record<string, string | undefined>;
  /** Every stdout and stderr so far. */
  outputs: string[];
  run(args: string[], extraEnv?: Record<string, string | undefined>, answer?: string): Promise<CliResult>;
  /** `plan --json` that must succeed; the parsed document. */
  planJson(args: string[]): Promise<any>;
  /** `apply --auto-approve` that must succeed. */
  apply(args: string[]): Promise<CliResult>;
}

export function stackRunner(s: TestServer, env: Record<string, string | undefined> = {}): StackRunner {
  const runner: StackRunner = {
    env: { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, ...env },
    outputs: [],
    async run(args, extraEnv = {}, answer) {
      const r = await runCli(args, { ...runner.env, ...extraEnv }, answer);
      runner.outputs.push(r.stdout, r.stderr);
      return r;
    },
    async planJson(args) {
      const r = await runner.run(['plan', ...args, '--json']);
      if (r.code !== 0) throw new Error(`plan ${args.join(' ')} exited ${r.code}: ${r.stdout}${r.stderr}`);
      return r.json();
    },
    async apply(args) {
      const r = await runner.run(['apply', ...args, '--auto-approve']);
      if (r.code !== 0) throw new Error(`apply ${args.join(' ')} exited ${r.code}: ${r.stdout}${r.stderr}`);
      return r;
    },
  };
  return runner;
}

/** The changes of a JSON plan that do something, by address. */
export function activeChanges(plan: any): Record<string, any> {
  return Object.fromEntries(plan.resource_changes.filter((c: any) => c.change.actions[0] !== 'no-op').map((c: any) => [c.address, c]));
}
