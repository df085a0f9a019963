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

/** Terraform's name for this machine's platform, e.g. linux_amd64. */
export const terraformPlatform = () => `${process.platform}_${({ x64: 'amd64', ia32: '386' } as Record<string, string>)[process.arch] ?? process.arch}`;

/**
 * Lays the executable out as a provider mirror (for `filesystem_mirror`, which `terraform
 * init` needs: dev_overrides make init ask the public registry). Returns the mirror root.
 */
export function writeMirror(executable: string, mirror: string, version: string) {
  const dir = path.join(mirror, 'registry.terraform.io', 'edgeform', 'edgeform', version, terraformPlatform());
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(executable, path.join(dir, `terraform-provider-edgeform_v${version}`));
  fs.chmodSync(path.join(dir, `terraform-provider-edgeform_v${version}`), 0o755);
  return mirror;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const out = await buildProvider();
  const version = JSON.parse(fs.readFileSync('package.json', 'utf8')).version as string;
  // Under dist/, whose package.json makes the extensionless bundle CommonJS.
  const mirror = writeMirror(out, path.join(path.dirname(out), 'mirror'), version);
  process.stderr.write(`built ${out} and the provider mirror ${mirror}\n`);
}
