// Where this package's files are (package.json, prisma/migrations, agent/), found by walking up
// from this module: the same answer whether it runs as TypeScript from a checkout (server/),
// compiled into dist/cli/ or installed from the package tarball. Reading `../package.json`
// relative to each module would be right for only one of those layouts.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

declare const __EDGEFORM_VERSION__: string | undefined;

function findRoot(): string | undefined {
  // A single executable (CommonJS, no files beside it) has no import.meta.url.
  if (typeof import.meta.url !== 'string') return undefined;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    try {
      if ((JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string }).name === 'edgeform') return dir;
    } catch { /* none here, or another package's: keep walking */ }
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** The package's folder, or undefined in a single executable (which carries no files). */
export const packageRoot: string | undefined = findRoot();

/** The package version: baked in by the build when it has one, else package.json's. */
export const packageVersion: string =
  typeof __EDGEFORM_VERSION__ === 'string'
    ? __EDGEFORM_VERSION__
    : packageRoot
      ? (JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version
      : '0.0.0';
