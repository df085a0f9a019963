// The README's quick starts can be followed in order against the one server `npm start`
// runs: what they show is what the examples hold, and they do not claim the same HTTPS
// hostport (a hostport belongs to one edge, so the second quick start would get a 409).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { synth } from '../../examples/cdktf/main.js';

process.env.CHECKPOINT_DISABLE = '1';

const root = path.resolve(import.meta.dirname, '../..');
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');

/** The README's fenced blocks of one language, in order. */
const blocks = (lang: string) => [...readme.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm'))].map((m) => m[1]);
const yamlDocs = (text: string) => parseAllDocuments(text).map((d) => d.toJS());

describe('README quick starts', () => {
  const [manifest] = blocks('yaml');
  const [hcl] = blocks('hcl');

  it('the manifest quick start is examples/manifests/quickstart/web.yaml (tested there), document for document', () => {
    const example = fs.readFileSync(path.join(root, 'examples/manifests/quickstart/web.yaml'), 'utf8');
    expect(yamlDocs(manifest)).toEqual(yamlDocs(example));
  });

  it('the manifest, the Terraform HCL and the CDKTF example each use their own hostports', () => {
    const fromManifest = yamlDocs(manifest).flatMap((d) => d.hostports ?? []);
    const fromHcl = [...hcl.matchAll(/hostports\s*=\s*\[([^\]]*)\]/g)].flatMap((m) => JSON.parse(`[${m[1]}]`) as string[]);
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-readme-'));
    try {
      const doc = JSON.parse(fs.readFileSync(path.join(synth(out), 'cdk.tf.json'), 'utf8'));
      const fromCdktf = Object.values(doc.resource.edgeform_https_edge as Record<string, { hostports: string[] }>).flatMap((e) => e.hostports);
      for (const list of [fromManifest, fromHcl, fromCdktf]) expect(list.length).toBeGreaterThan(0);
      const all = [...fromManifest, ...fromHcl, ...fromCdktf];
      expect(new Set(all).size, all.join(', ')).toBe(all.length);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });
});
