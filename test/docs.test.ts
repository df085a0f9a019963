// Generated documentation is current, and the error-code registry, the docs and the
// server's code agree.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { generated } from '../scripts/gen-docs.js';
import { ERRORS } from '../server/http/errors.js';

const root = path.resolve(import.meta.dirname, '..');

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const at = path.join(dir, e.name);
    return e.isDirectory() ? filesUnder(at) : e.name.endsWith('.ts') ? [at] : [];
  });
}

describe('generated documentation', () => {
  it.each(generated().map((g) => [g.file, g] as const))('%s is what scripts/gen-docs.ts writes (run npm run docs:gen)', (_f, { file, content }) => {
    expect(fs.readFileSync(path.join(root, file), 'utf8')).toBe(content);
  });
});

describe('error codes', () => {
  const api = fs.readFileSync(path.join(root, 'docs/api.md'), 'utf8');
  const section = /<!-- generated:errors[^>]*-->([\s\S]*?)<!-- \/generated:errors -->/.exec(api)![1];

  it('docs/api.md lists exactly the registry\'s codes, with their statuses', () => {
    const listed = [...section.matchAll(/^\| `(ERR_SERVICE_\d+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]);
    expect(listed).toEqual(Object.entries(ERRORS).map(([code, e]) => [code, e.status]));
  });

  it('every code the server\'s code names is in the registry', () => {
    const used = new Set<string>();
    for (const file of [...filesUnder(path.join(root, 'server')), ...filesUnder(path.join(root, 'bin'))]) {
      for (const m of fs.readFileSync(file, 'utf8').matchAll(/ERR_SERVICE_\d+/g)) used.add(m[0]);
    }
    expect(used.size).toBeGreaterThan(10);
    for (const code of used) expect(Object.keys(ERRORS), code).toContain(code);
  });

  it('every code the hand-written docs mention is in the registry', () => {
    for (const m of api.matchAll(/ERR_SERVICE_\d+/g)) expect(Object.keys(ERRORS)).toContain(m[0]);
  });

  it('each code has an error status and a sentence', () => {
    for (const [code, e] of Object.entries(ERRORS)) {
      expect(e.status, code).toBeGreaterThanOrEqual(400);
      expect(e.summary, code).toMatch(/^[A-Z].*\.$/);
    }
  });
});
