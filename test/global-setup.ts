// Before any test: compile the CLI (scripts/build-cli.mjs), so the tests that start
// bin/edgeform.js as a process run the current sources compiled, as a user's `npm ci` would,
// and start in a tenth of the time. bin/edgeform.js also refuses a build older than any of
// its sources (bin/launch.js), so an edit made while tests run is tested from source.
export default async function setup() {
  // @ts-expect-error: a plain JavaScript module without declarations
  const { buildCli } = (await import('../scripts/build-cli.mjs')) as { buildCli(): Promise<number> };
  await buildCli();
}
