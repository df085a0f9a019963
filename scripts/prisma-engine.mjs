// Drives Prisma's wasm schema engine in-process, because the native engine cannot be
// downloaded on these machines (see ../shared/notes/prisma-offline.md).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

let loaded;

async function loadWasm() {
  const bg = await import('@prisma/schema-engine-wasm/schema_engine_bg');
  globalThis.PRISMA_WASM_PANIC_REGISTRY ??= {
    message: '',
    set_message(m) { this.message = m; },
    get() { return this.message; },
  };
  const dir = path.dirname(require.resolve('@prisma/schema-engine-wasm'));
  const wasm = await WebAssembly.compile(fs.readFileSync(path.join(dir, 'schema_engine_bg.wasm')));
  const instance = await WebAssembly.instantiate(wasm, { './schema_engine_bg.js': bg });
  bg.__wbg_set_wasm(instance.exports);
  instance.exports.__wbindgen_start?.();
  return bg;
}

/** One wasm instance per process: instantiating it twice makes the engine panic. */
export async function openSchemaEngine(provider, schemaPath, content, pgUrl) {
  loaded ??= loadWasm();
  const bg = await loaded;
  const { bindMigrationAwareSqlAdapterFactory } = await import('@prisma/driver-adapter-utils');
  const factory = await adapterFactory(provider, pgUrl);
  return bg.SchemaEngine.new({ datamodels: [[schemaPath, content]] }, () => {}, bindMigrationAwareSqlAdapterFactory(factory));
}

async function adapterFactory(provider, pgUrl) {
  if (provider === 'sqlite') {
    const { PrismaBetterSqlite3 } = await import('@prisma/adapter-better-sqlite3');
    return new PrismaBetterSqlite3({ url: ':memory:' });
  }
  const { PrismaPg } = await import('@prisma/adapter-pg');
  // The engine connects on start even for datamodel-to-datamodel diffs.
  return new PrismaPg({ connectionString: pgUrl });
}
