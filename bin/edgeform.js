#!/usr/bin/env node
// The `edgeform` command. TypeScript sources run through tsx's loader, so a fresh
// `npm ci` needs no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./cli.ts');
process.exitCode = await main(process.argv);
