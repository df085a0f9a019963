// Bundles the provider into one executable file, dist/terraform-provider-edgeform: one
// file starts fast (terraform launches it several times per command) and can be copied
// into a provider mirror as it is.
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

export const OUTFILE = 'dist/terraform-provider-edgeform';

export async function buildProvider(root = process.cwd(), outfile = path.join(root, OUTFILE)) {
  const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version as string;
  await build({
    entryPoints: [path.join(root, 'provider/terraform/main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    loader: { '.proto': 'text' },
    banner: { js: '#!/usr/bin/env node' },
    define: { PROVIDER_VERSION: JSON.stringify(version) },
    logLevel: 'warning',
  });
  // The package is "type": "module"; the bundle is CommonJS, with no extension.
  fs.writeFileSync(path.join(path.dirname(outfile), 'package.json'), '{ "type": "commonjs" }\n');
  fs.chmodSync(outfile, 0o755);
  return outfile;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const out = await buildProvider();
  process.stderr.write(`built ${out}\n`);
}
