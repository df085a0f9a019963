// The entry of the single executable (scripts/build-cli-exe.mjs): CommonJS, which a single
// executable requires, so no top-level await.
import { main } from './cli.js';

main(process.argv).then((code) => { process.exitCode = code; });
