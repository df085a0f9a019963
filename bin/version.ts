// `edgeform version`: what is installed, for bug reports and pipelines (`--json` for machines),
// as `terraform version` and `kubectl version --client` print it.
import { Command } from 'commander';
import { packageVersion as version } from '../server/package-root.js';
import type { Io } from './reconcile.js';

/** The API version the server speaks and the clients send (Service-Version). */
const API_VERSION = '2';

export function versionInfo() {
  return { version, api_version: API_VERSION, node: process.versions.node, platform: process.platform, arch: process.arch };
}

export function versionCommand(setCode: (code: number) => void, io: () => Io): Command {
  return new Command('version')
    .description('Print the version of edgeform, the API version it speaks, and the Node.js and platform it runs on.')
    .option('--json', 'print one JSON document')
    .action((opts: { json?: boolean }) => {
      const info = versionInfo();
      const out = io();
      if (opts.json) out.out(`${JSON.stringify(info)}\n`);
      else out.out(`edgeform v${info.version}\nAPI version ${info.api_version}\non ${info.platform}_${info.arch}, Node.js v${info.node}\n`);
      setCode(0);
    });
}
