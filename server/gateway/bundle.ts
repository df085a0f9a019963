// The agent build this server ships: agent/ bundled by esbuild into one CommonJS file that
// `node` runs with no node_modules (built once, on first need, and kept in memory).
import { createHash } from 'node:crypto';
import path from 'node:path';
import { packageRoot } from '../package-root.js';

export interface AgentBundle { version: string; sha256: string; size: number; code: Buffer }

let building: Promise<AgentBundle | undefined> | undefined;

const ENTRY = path.join(packageRoot ?? '.', 'agent/bundle.ts');

/** The bundle, or undefined when it cannot be built here (esbuild missing: a production install without dev dependencies). */
export function agentBundle(version: string, log: (msg: string) => void): Promise<AgentBundle | undefined> {
  building ??= (async () => {
    try {
      const esbuild = await import('esbuild');
      const out = await esbuild.build({
        entryPoints: [ENTRY],
        bundle: true,
        platform: 'node',
        format: 'cjs',
        target: 'node20',
        write: false,
        minify: true,
        legalComments: 'none',
        define: { __AGENT_VERSION__: JSON.stringify(version) },
        logLevel: 'silent',
      });
      const code = Buffer.from(out.outputFiles[0].contents);
      return { version, code, size: code.length, sha256: createHash('sha256').update(code).digest('hex') };
    } catch (e) {
      log(`the agent bundle cannot be built, so agents are offered no update: ${(e as Error).message.split('\n')[0]}`);
      building = undefined;
      return undefined;
    }
  })();
  return building;
}
