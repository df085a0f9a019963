#!/usr/bin/env node
// The `edgeform` command. Runs the build compiled ahead of time (dist/cli/, made on `npm ci` by
// scripts/build-cli.mjs) when it is current; in a checkout whose sources changed since, or with
// EDGEFORM_FROM_SOURCE=1, the TypeScript sources through tsx's loader (slower to start).
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { compiledEntry } from './launch.js';

const compiled = compiledEntry(path.resolve(import.meta.dirname, '..'));
let main;
if (compiled) ({ main } = await import(pathToFileURL(compiled).href));
else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write('edgeform: dist/cli/ is missing or older than the sources, and tsx (a dev dependency) is not installed to run them: run `npm ci` (dev dependencies included) or `npm run build:cli` in this checkout\n');
    process.exit(1);
  }
  register();
  ({ main } = await import('./cli.ts'));
}
process.exitCode = await main(process.argv);
