// The agent's version: baked in by esbuild when bundled, else package.json's.
// EDGEFORM_AGENT_VERSION overrides it (to try updates against a server of the same build).
import { packageVersion } from '../server/package-root.js';

declare const __AGENT_VERSION__: string | undefined;

export const BUILT_VERSION: string = typeof __AGENT_VERSION__ === 'string' ? __AGENT_VERSION__ : packageVersion;
export const AGENT_VERSION: string = process.env.EDGEFORM_AGENT_VERSION || BUILT_VERSION;
