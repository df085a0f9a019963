#!/usr/bin/env node
// Compiles the CLI ahead of time into dist/cli/ (ES modules, one chunk per subcommand's code,
// dependencies left in node_modules), so that `edgeform` starts without compiling TypeScript:
// bin/edgeform.js runs dist/cli/ when it is at least as new as every source file it was built
// from (listed in dist/cli/inputs.json), and the TypeScript sources through tsx otherwise.
// Runs on `npm ci` (the `prepare` script) and before the tests (vitest's globalSetup).
//   node scripts/build-cli.mjs            build into dist/cli/
// The build is written beside and swapped in by renames, so a process starting meanwhile runs
// either the old build or the sources, never half of the new one.
import fs from 'node:fs';
import path from 'node:path';

export const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
export const OUT = path.join(root, 'dist', 'cli');

export const EXTERNAL = ['undici', 'better-sqlite3', '@prisma/*', 'pg', 'pg-native', 'esbuild', 'tsx', 'cdktf', 'constructs', '@grpc/*', 'protobufjs', 'cdktf/*', 'cpu-features'];

/** Builds dist/cli/ from the sources; returns the number of source files it was built from. */
export async function buildCli() {
  const { build } = await import('esbuild');
  // Taken before the build reads any source: an edit made during the build makes it stale.
  const builtAt = Date.now();
  const tmp = `${OUT}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: { cli: path.join(root, 'bin/cli.ts') },
    outdir: tmp,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // Dependencies are bundled too (undici aside: it is imported on demand, and a bundled CommonJS
    // module imported so has no named exports): Node's ES module loader spends more time resolving and
    // linking yaml's and zod's hundreds of files than running them. Left in node_modules: native
    // addons, what loads files of its own at run time, and what the CLI runs only as a tool
    // (cpu-features: ssh2's optional addon, which npm does not build here; ssh2 runs without it).
    external: EXTERNAL,
    banner: { js: "import { createRequire as __edgeformRequire } from 'node:module'; const require = __edgeformRequire(import.meta.url);" },
    loader: { '.proto': 'text' },
    // Whitespace and syntax only: identifiers stay as written, so stack traces stay readable and
    // classes keep their names without keepNames, whose defineProperty per function cost serve
    // a third of a second at start.
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'warning',
  });
  // node_modules is left out: `npm ci` replaces what changed there, and a build is made after it.
  const inputs = Object.keys(result.metafile.inputs).filter((f) => !f.startsWith('node_modules/') && !f.includes(':'));
  fs.writeFileSync(path.join(tmp, 'inputs.json'), `${JSON.stringify({ builtAt, inputs })}\n`);
  const old = `${OUT}.old-${process.pid}`;
  fs.rmSync(old, { recursive: true, force: true });
  if (fs.existsSync(OUT)) fs.renameSync(OUT, old);
  fs.renameSync(tmp, OUT);
  fs.rmSync(old, { recursive: true, force: true });
  return inputs.length;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  try {
    await import('esbuild');
  } catch {
    // `npm ci --omit=dev` in a checkout: no compiler; bin/edgeform.js runs the sources (tsx is a dev dependency too, so say so).
    process.stderr.write('edgeform: esbuild is not installed (dev dependencies omitted), so dist/cli/ was not built\n');
    process.exit(0);
  }
  const n = await buildCli();
  process.stderr.write(`built ${path.relative(root, OUT)}/ from ${n} source files\n`);
}
