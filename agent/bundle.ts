// Entry of the single-file agent bundle the server ships for updates: `node bundle.cjs agent ...`.
import { Command } from 'commander';
import { agentCommand } from './command.js';

let code = 0;
const program = new Command('edgeform').addCommand(agentCommand((c) => { code = c; }));
program.parseAsync(process.argv).then(() => { process.exitCode = code; }, (e: Error) => {
  process.stderr.write(`Error: ${e.message}\n`);
  process.exitCode = 1;
});
