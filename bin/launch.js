// Which build of the CLI bin/edgeform.js runs (plain JavaScript: it decides before anything is compiled).
import fs from 'node:fs';
import path from 'node:path';

/**
 * dist/cli/cli.mjs when it can be trusted to be the current code, else undefined (run the
 * TypeScript sources). Trusted when no source is beside it (an installed package) or when no
 * source file it was built from changed since the build; never with EDGEFORM_FROM_SOURCE=1.
 * A stale build is never run: it would be code nobody is looking at.
 */
export function compiledEntry(root, env = process.env) {
  if (env.EDGEFORM_FROM_SOURCE === '1') return undefined;
  const dir = path.join(root, 'dist', 'cli');
  let stamp;
  try {
    stamp = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
  } catch {
    return undefined;
  }
  if (fs.existsSync(path.join(root, 'bin', 'cli.ts'))) {
    for (const file of stamp.inputs) {
      const stat = fs.statSync(path.join(root, file), { throwIfNoEntry: false });
      if (!stat || stat.mtimeMs >= stamp.builtAt) return undefined;
    }
  }
  return path.join(dir, 'cli.mjs');
}
