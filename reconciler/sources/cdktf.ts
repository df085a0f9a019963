// `--cdktf DIR`: a synthesized CDKTF stack as manifest documents, for users without
// Terraform. DIR is a stack's synth folder (holding cdk.tf.json) or the whole synth output
// (cdktf.out, whose stacks/*/cdk.tf.json are all read).
import fs from 'node:fs';
import path from 'node:path';
import { manifestsFromSynth } from '../../provider/cdktf/from-synth.js';
import { interpolate } from '../manifest/interpolate.js';
import type { RawDocument } from '../manifest/load.js';
import type { Problems } from '../manifest/problems.js';

function synthFiles(dir: string): string[] {
  const direct = path.join(dir, 'cdk.tf.json');
  if (fs.existsSync(direct)) return [direct];
  const stacks = path.join(dir, 'stacks');
  if (!fs.existsSync(stacks)) return [];
  return fs
    .readdirSync(stacks)
    .sort()
    .map((s) => path.join(stacks, s, 'cdk.tf.json'))
    .filter((f) => fs.existsSync(f));
}

export function cdktfDocuments(dir: string, problems: Problems): RawDocument[] {
  const files = synthFiles(dir);
  if (!files.length) {
    problems.add({ file: dir, line: 0 }, 'no cdk.tf.json here or in stacks/*/; run "cdktf synth" (or your app) first and give its output folder');
    return [];
  }
  const out: RawDocument[] = [];
  for (const file of files) {
    let json: unknown;
    try {
      json = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      problems.add({ file, line: 0 }, `not JSON: ${(e as Error).message}`);
      continue;
    }
    const baseDir = path.dirname(file);
    const result = manifestsFromSynth(json, baseDir);
    for (const p of result.problems) problems.add({ file: '', line: 0 }, p);
    for (const doc of result.documents) {
      const source = { file, line: 0 };
      const value = interpolate(doc, baseDir, (p, message) => problems.add(source, `resource ${String(doc.kind)}/${String(doc.name)}${p.length ? ` ${p.join('.')}` : ''}: ${message}`));
      out.push({ value, source, lineAt: () => 0 });
    }
  }
  return out;
}
