// Runs the real `terraform` binary against the provider built from this tree: a CLI
// config with dev_overrides pointing at a freshly bundled executable, one working folder
// per workspace, and the test server's address and token in the environment.
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildProvider, writeMirror } from '../../provider/terraform/build.js';
import type { TestServer } from './server.js';

/** Whether a terraform binary is on the PATH; suites that need it say loudly when it is not. */
export const hasTerraform = spawnSync('terraform', ['version'], { stdio: 'ignore' }).status === 0;
if (!hasTerraform) {
  process.stderr.write('\n!!! terraform is not on the PATH: the Terraform provider suites are SKIPPED. Install terraform 1.11 to run them. !!!\n\n');
}

let built: Promise<string> | undefined;

/** Bundles the provider once per test process into a private folder; returns that folder. */
export function providerDir(): Promise<string> {
  built ??= (async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-provider-'));
    await buildProvider(process.cwd(), path.join(dir, 'terraform-provider-edgeform'));
    return dir;
  })();
  return built;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface Workspace {
  dir: string;
  env: NodeJS.ProcessEnv;
  /** Writes main.tf (the provider requirement is added). */
  write(hcl: string): void;
  run(...args: string[]): Promise<RunResult>;
  /** Runs and fails the test with terraform's output unless the exit code is expected. */
  ok(args: string[], codes?: number[]): Promise<RunResult>;
  apply(): Promise<RunResult>;
  /** `plan -detailed-exitcode`: 0 no changes, 2 changes. */
  plan(): Promise<RunResult>;
  /** `terraform show -json` values by resource address. */
  state(): Promise<Record<string, Record<string, any>>>;
}

const HEADER = `terraform {
  required_providers {
    edgeform = { source = "edgeform/edgeform" }
  }
}
`;

/** The CLI configuration that points terraform at a provider folder. */
export const devOverrides = (dir: string) => `provider_installation {
  dev_overrides {
    "edgeform/edgeform" = ${JSON.stringify(dir)}
  }
  direct {}
}
`;

const COLOURED = new Set(['apply', 'plan', 'destroy', 'import', 'show', 'init', 'validate', 'refresh']);

/** A CLI configuration that installs the provider (the bundle, or `executable`) from a mirror, as `terraform init` needs. */
export async function mirrorConfig(executable?: string): Promise<string> {
  const mirror = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-mirror-'));
  const version = JSON.parse(fs.readFileSync('package.json', 'utf8')).version as string;
  writeMirror(executable ?? path.join(await providerDir(), 'terraform-provider-edgeform'), mirror, version);
  return `provider_installation {
  filesystem_mirror {
    path    = ${JSON.stringify(mirror)}
    include = ["edgeform/edgeform"]
  }
  direct {
    exclude = ["edgeform/edgeform"]
  }
}
`;
}

export interface WorkspaceOptions {
  /** The working folder (default: a new temporary one). */
  dir?: string;
  /** The CLI configuration (default: dev_overrides pointing at the freshly built provider). */
  cliConfig?: string;
}

export async function workspace(server: TestServer, opts: WorkspaceOptions = {}): Promise<Workspace> {
  const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-tf-'));
  const cli = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-cli-')), 'cli.tfrc');
  fs.writeFileSync(cli, opts.cliConfig ?? devOverrides(await providerDir()));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TF_CLI_CONFIG_FILE: cli,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    EDGEFORM_API_URL: server.url,
    EDGEFORM_API_KEY: server.token,
  };
  delete env.TF_LOG;
  // Asynchronous on purpose: the test server runs in this process and must keep answering.
  const run = (...args: string[]) =>
    new Promise<RunResult>((resolve) => {
      execFile('terraform', [...args, ...(COLOURED.has(args[0]) ? ['-no-color'] : [])], { cwd: dir, env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
  const ok = async (args: string[], codes = [0]) => {
    const r = await run(...args);
    if (!codes.includes(r.code)) throw new Error(`terraform ${args.join(' ')} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  return {
    dir,
    env,
    write: (hcl) => fs.writeFileSync(path.join(dir, 'main.tf'), HEADER + hcl),
    run,
    ok,
    apply: () => ok(['apply', '-auto-approve', '-input=false']),
    plan: () => ok(['plan', '-detailed-exitcode', '-input=false'], [0, 2]),
    async state() {
      const r = await ok(['show', '-json']);
      const doc = JSON.parse(r.stdout);
      const out: Record<string, Record<string, any>> = {};
      for (const res of doc.values?.root_module?.resources ?? []) out[res.address] = res.values;
      return out;
    },
  };
}
