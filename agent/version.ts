// The agent's version: baked in by esbuild when bundled, else package.json's.
// EDGEFORM_AGENT_VERSION overrides it (to try updates against a server of the same build).
import fs from 'node:fs';
import path from 'node:path';

declare const __AGENT_VERSION__: string | undefined;

function packageVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

export const BUILT_VERSION: string = typeof __AGENT_VERSION__ === 'string' ? __AGENT_VERSION__ : packageVersion();
export const AGENT_VERSION: string = process.env.EDGEFORM_AGENT_VERSION || BUILT_VERSION;
