#!/usr/bin/env node
// Generates the Prisma clients (one per supported database) into generated/. Runs on install.
// The CLI would try to download a native schema engine that `generate` does not need;
// pointing PRISMA_SCHEMA_ENGINE_BINARY at any existing file stops it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
// The installed package (npm install ./edgeform-VERSION.tgz) has no schema: its compiled CLI
// carries the generated clients, so there is nothing to generate.
if (!fs.existsSync(path.join(root, 'prisma/schema.prisma'))) process.exit(0);
const schema = fs.readFileSync(path.join(root, 'prisma/schema.prisma'), 'utf8');
fs.mkdirSync(path.join(root, 'generated'), { recursive: true });
const pgSchema = path.join(root, 'generated/postgresql.prisma');
fs.writeFileSync(
  pgSchema,
  schema
    .replace(/provider\s*=\s*"sqlite"/, 'provider = "postgresql"')
    .replace('output       = "../generated/sqlite"', 'output       = "./postgresql"'),
);
const prismaCli = createRequire(import.meta.url).resolve('prisma/build/index.js');
const env = { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: path.join(root, 'package.json'), PRISMA_HIDE_UPDATE_MESSAGE: '1' };
for (const file of ['prisma/schema.prisma', pgSchema]) {
  execFileSync(process.execPath, [prismaCli, 'generate', '--schema', file], { cwd: root, env, stdio: ['ignore', 'ignore', 'inherit'] });
}
