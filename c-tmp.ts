import fs from 'node:fs';
import { compilePolicy, isCompiled } from './server/policy/index.js';
let ok = 0;
for (const f of fs.readdirSync('/tmp/ex').sort()) {
  const r = compilePolicy(fs.readFileSync('/tmp/ex/' + f, 'utf8'));
  if (isCompiled(r)) { ok++; continue; }
  console.log('X', f, '::', r.problems.map((p) => `${p.path}: ${p.message}`).join(' | ').slice(0, 300));
}
console.log('ok', ok);
