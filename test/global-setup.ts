// Before any test: compile the CLI (scripts/build-cli.mjs), so the tests that start
// bin/edgeform.js as a process run the current sources compiled, as a user's `npm ci` would,
// and start in a tenth of the time. bin/edgeform.js also refuses a build older than any of
// its sources (bin/launch.js), so an edit made while tests run is tested from source.
// A build that fails does not stop the suite: dist/cli/ is removed, every process runs the
// sources, and test/unit/cli-launch.test.ts fails, saying the build is broken.
import fs from 'node:fs';

export default async function setup() {
  // @ts-expect-error: a plain JavaScript module without declarations
  const { buildCli, OUT } = (await import('../scripts/build-cli.mjs')) as { buildCli(): Promise<number>; OUT: string };
  try {
    await buildCli();
  } catch (e) {
    fs.rmSync(OUT, { recursive: true, force: true });
    process.stderr.write(`test/global-setup.ts: the CLI build failed, so the tests run the sources: ${(e as Error).message}\n`);
  }
}
