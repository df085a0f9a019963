#!/usr/bin/env node
// The whole CLI as one executable file for this machine's platform (Node's single-executable
// applications, as provider/terraform/sea.ts builds the provider): every command, `serve` with
// SQLite or PostgreSQL included, on a machine with no Node.js and no node_modules.
//   npm run build:cli-exe      writes dist/sea/edgeform
// Inside: the CLI bundled as CommonJS with its dependencies, the migrations and the version
// (esbuild defines), and better-sqlite3's native addon as an asset, written on first use to
// a cache folder (EDGEFORM_CACHE_DIR, else $XDG_CACHE_HOME/edgeform or ~/.cache/edgeform) and
// loaded from there: a native addon cannot be loaded from memory. Built per platform, on it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const require = createRequire(import.meta.url);
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
export const EXE = path.join(root, 'dist', 'sea', 'edgeform');

function migrations() {
  const out = {};
  for (const provider of ['sqlite', 'postgresql']) {
    const dir = path.join(root, 'prisma/migrations', provider);
    out[provider] = fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, 'migration.sql'))).sort()
      .map((name) => ({ name, sql: fs.readFileSync(path.join(dir, name, 'migration.sql'), 'utf8') }));
  }
  return out;
}

/** better-sqlite3 finds its addon through `bindings`; in the executable it is the asset, written out once. */
const BINDINGS_SHIM = `
const fs = require('node:fs'), os = require('node:os'), path = require('node:path'), crypto = require('node:crypto');
module.exports = function bindings() {
  const data = Buffer.from(require('node:sea').getRawAsset('better_sqlite3.node'));
  const dir = process.env.EDGEFORM_CACHE_DIR || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'edgeform');
  const file = path.join(dir, 'better_sqlite3-' + crypto.createHash('sha256').update(data).digest('hex').slice(0, 16) + '.node');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = file + '.' + process.pid;
    fs.writeFileSync(tmp, data, { mode: 0o500 });
    fs.renameSync(tmp, file);
  }
  const m = { exports: {} };
  process.dlopen(m, file);
  return m.exports;
};
`;

export async function buildCliExe(outfile = EXE) {
  const { build } = await import('esbuild');
  const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-cli-sea-'));
  try {
    const bundle = path.join(work, 'edgeform.cjs');
    await build({
      absWorkingDir: root,
      entryPoints: [path.join(root, 'bin/sea-main.ts')],
      outfile: bundle,
      bundle: true,
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      loader: { '.proto': 'text' },
      // Not needed by any command the executable runs: esbuild builds agent updates from
      // sources (absent here: agents are then offered none), pg-native is pg's optional driver.
      external: ['esbuild', 'pg-native', 'tsx', 'tsx/*', 'cpu-features'],
      define: {
        __EDGEFORM_VERSION__: JSON.stringify(version),
        __EDGEFORM_MIGRATIONS__: JSON.stringify(migrations()),
        'import.meta.url': '__edgeformMetaUrl',
      },
      banner: { js: 'var __edgeformMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
      plugins: [{
        name: 'bindings-from-asset',
        setup(b) {
          b.onResolve({ filter: /^bindings$/ }, () => ({ path: 'bindings', namespace: 'sea-bindings' }));
          b.onLoad({ filter: /.*/, namespace: 'sea-bindings' }, () => ({ contents: BINDINGS_SHIM, loader: 'js' }));
        },
      }],
      minifyWhitespace: true,
      minifySyntax: true,
      logLevel: 'error',
    });
    const addon = path.join(path.dirname(require.resolve('better-sqlite3/package.json')), 'build', 'Release', 'better_sqlite3.node');
    const blob = path.join(work, 'sea-prep.blob');
    const config = path.join(work, 'sea-config.json');
    fs.writeFileSync(config, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false, assets: { 'better_sqlite3.node': addon } }));
    execFileSync(process.execPath, ['--experimental-sea-config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    fs.mkdirSync(path.dirname(outfile), { recursive: true });
    fs.rmSync(outfile, { force: true });
    fs.copyFileSync(process.execPath, outfile);
    fs.chmodSync(outfile, 0o755);
    const { inject } = require('postject');
    await inject(outfile, 'NODE_SEA_BLOB', fs.readFileSync(blob), { sentinelFuse: SEA_FUSE, machoSegmentName: 'NODE_SEA' });
    if (process.platform === 'darwin') execFileSync('codesign', ['--sign', '-', outfile]);
    return outfile;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  const exe = await buildCliExe();
  process.stderr.write(`built ${path.relative(root, exe)} (${process.platform}-${process.arch}; runs with no Node.js and no node_modules)\n`);
}
