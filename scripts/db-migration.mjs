#!/usr/bin/env node
// Writes the next versioned migration for every supported database from prisma/schema.prisma:
//   node scripts/db-migration.mjs <name>
// Each migration folder keeps a snapshot of the schema it reaches, so the next diff is
// datamodel-to-datamodel. PostgreSQL's engine needs a live server even for that, so a
// throwaway cluster is started for the run.
import fs from 'node:fs';
import path from 'node:path';
import { openSchemaEngine } from './prisma-engine.mjs';
import { startPostgres } from './pg-cluster.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const name = process.argv[2];
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error('usage: node scripts/db-migration.mjs <name>   (lower-case letters, digits, _)');
  process.exit(2);
}

export const providers = ['sqlite', 'postgresql'];
const schema = fs.readFileSync(path.join(root, 'prisma/schema.prisma'), 'utf8');
const forProvider = (text, provider) => text.replace(/provider\s*=\s*"sqlite"/, `provider = "${provider}"`);
const stamp = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);

// Ids sort by creation time only under byte-wise collation; PostgreSQL's default may not be.
const postProcess = {
  sqlite: (sql) => sql,
  postgresql: (sql) => sql.replace(/("id" TEXT)( NOT NULL)/g, '$1 COLLATE "C"$2'),
};

const pg = await startPostgres();
try {
  const pgUrl = await pg.createDatabase('migrations');
  process.env.EDGEFORM_MIGRATION_PG_URL = pgUrl;
  for (const provider of providers) {
    const dir = path.join(root, 'prisma/migrations', provider);
    fs.mkdirSync(dir, { recursive: true });
    const previous = fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, 'schema.prisma'))).sort().at(-1);
    const current = forProvider(schema, provider);
    const engine = await openSchemaEngine(provider, 'schema.prisma', current, pgUrl);
    const from = previous
      ? { tag: 'schemaDatamodel', files: [{ path: 'schema.prisma', content: fs.readFileSync(path.join(dir, previous, 'schema.prisma'), 'utf8') }] }
      : { tag: 'empty' };
    const to = { tag: 'schemaDatamodel', files: [{ path: 'schema.prisma', content: current }] };
    const result = await engine.diff({ from, to, script: true, exitCode: true, filters: { externalTables: [], externalEnums: [] } });
    if (result.exitCode === 0) {
      console.log(`${provider}: no changes`);
      continue;
    }
    const target = path.join(dir, `${stamp}_${name}`);
    fs.mkdirSync(target);
    fs.writeFileSync(path.join(target, 'migration.sql'), postProcess[provider](result.stdout));
    fs.writeFileSync(path.join(target, 'schema.prisma'), current);
    console.log(`${provider}: wrote ${path.relative(root, target)}/migration.sql`);
  }
} finally {
  pg.stop();
}
