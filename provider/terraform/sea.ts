// The provider as a single self-contained executable (Node's single-executable
// applications): the esbuild bundle injected into a copy of the running node binary, so a
// Terraform runner needs no Node.js. Built per platform on that platform (the node binary
// is the platform's), as docs/terraform.md explains; laid out as a filesystem mirror.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { buildProvider, terraformPlatform, writeMirror } from './build.js';

/** The fuse Node's single-executable support looks for (documented in Node's sea docs). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

export const EXECUTABLE_OUT = 'dist/sea/terraform-provider-edgeform';

/** Builds the self-contained executable at `outfile` (for this machine's platform) and returns it. */
export async function buildExecutable(root = process.cwd(), outfile = path.join(root, EXECUTABLE_OUT)): Promise<string> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-sea-'));
  try {
    const bundle = await buildProvider(root, path.join(work, 'provider.cjs'));
    const blob = path.join(work, 'sea-prep.blob');
    const config = path.join(work, 'sea-config.json');
    // No code cache: the blob then does not depend on V8 flags of the build machine.
    fs.writeFileSync(config, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false }));
    execFileSync(process.execPath, ['--experimental-sea-config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    fs.mkdirSync(path.dirname(outfile), { recursive: true });
    fs.rmSync(outfile, { force: true });
    fs.copyFileSync(process.execPath, outfile);
    fs.chmodSync(outfile, 0o755);
    const { inject } = createRequire(import.meta.url)('postject') as { inject(file: string, name: string, data: Buffer, opts: Record<string, unknown>): Promise<void> };
    await inject(outfile, 'NODE_SEA_BLOB', fs.readFileSync(blob), { sentinelFuse: SEA_FUSE, machoSegmentName: 'NODE_SEA' });
    // macOS refuses a binary whose signature no longer matches: sign it again, ad hoc.
    if (process.platform === 'darwin') execFileSync('codesign', ['--sign', '-', outfile]);
    return outfile;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const root = process.cwd();
  const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version as string;
  const exe = await buildExecutable(root);
  const mirror = writeMirror(exe, path.join(root, 'dist', 'mirror'), version);
  process.stderr.write(`built ${exe} (${terraformPlatform()}, no Node.js needed to run it) and the provider mirror ${mirror}\n`);
}
