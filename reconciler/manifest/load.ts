// Reads manifest files: paths or directories (`*.yaml`/`*.yml`, recursively, hidden ones
// and `--exclude` globs skipped), each a multi-document YAML stream. Every document keeps where it came from, so any problem
// found later can say file:line.
import fs from 'node:fs';
import path from 'node:path';
import { Minimatch } from 'minimatch';
import { isMap, isSeq, LineCounter, parseAllDocuments, type Document } from 'yaml';
import { interpolate } from './interpolate.js';
import { Problems } from './problems.js';
import { isStackFile } from '../stack-name.js';

type Doc = Record<string, any>;

export interface Source {
  file: string;
  line: number;
}

export interface RawDocument {
  /** The document with interpolation done. */
  value: Doc;
  source: Source;
  /** The line of the value at a path inside the document (or the document's own line). */
  lineAt(path: readonly (string | number)[]): number;
  /** An `${env:...}` or `${file:...}` could not be resolved (already reported). */
  interpolationFailed?: boolean;
}

export interface FileOptions {
  /** Globs (`--exclude`) of files and folders to skip. */
  exclude?: readonly string[];
}

/**
 * Whether a path is excluded: a glob with a `/` matches the path relative to the folder
 * given with -f, or as given; one without matches a file or folder name at any depth.
 */
function excluder(globs: readonly string[]) {
  const matchers = globs.map((g) => new Minimatch(g.replace(/\/+$/, ''), { dot: true, matchBase: true }));
  return (...candidates: string[]) => candidates.some((c) => matchers.some((m) => m.match(c.split(path.sep).join('/'))));
}

/**
 * The manifest files a list of paths names, in a stable order. In folders, hidden files
 * and folders (`.github/`, `.gitlab-ci.yml`) are skipped, and so is what `exclude` names.
 */
export function manifestFiles(paths: readonly string[], problems: Problems, opts: FileOptions = {}): string[] {
  const out: string[] = [];
  const excluded = excluder(opts.exclude ?? []);
  let skipped = 0;
  const walk = (root: string, p: string) => {
    for (const e of fs.readdirSync(p, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = path.join(p, e.name);
      if (e.name.startsWith('.') || excluded(path.relative(root, full), full)) {
        skipped++;
        continue;
      }
      if (e.isDirectory()) walk(root, full);
      else if (/\.ya?ml$/i.test(e.name) && !isStackFile(e.name)) out.push(full); // edgeform.yaml names the stack
    }
  };
  for (const p of paths) {
    let stat: fs.Stats;
    try {
      stat = fs.statSync(p);
    } catch {
      problems.add({ file: p, line: 0 }, `no such file or directory; -f takes a manifest file or a directory of *.yaml files`);
      continue;
    }
    if (stat.isDirectory()) {
      const before = out.length;
      skipped = 0;
      walk(p, p);
      // A mistyped folder would otherwise declare nothing, and with --prune delete the stack.
      const why = skipped ? ` (${skipped} hidden or --exclude'd file${skipped === 1 ? '' : 's'} or folder${skipped === 1 ? '' : 's'} skipped)` : '';
      if (out.length === before) problems.add({ file: p, line: 0 }, `no *.yaml or *.yml files in this folder (or below)${why}; -f takes a manifest file or a folder of them (to declare nothing, give an empty file)`);
    } else if (!excluded(path.normalize(p), path.basename(p)) && !isStackFile(p)) out.push(p);
  }
  return [...new Set(out)];
}

/** Parses one YAML text into documents (empty documents are skipped). */
export function parseManifestText(text: string, file: string, problems: Problems): RawDocument[] {
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true, merge: true });
  const out: RawDocument[] = [];
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list as Document.Parsed[]) {
    const start = lines.linePos(doc.range?.[0] ?? 0).line;
    if (doc.errors.length) {
      // Where the parser stopped (prettyErrors is off, so linePos is unset); an unclosed
      // quote or bracket stops at the end of the text, which is its last line, not past it.
      const last = lines.linePos(text.replace(/\s+$/, '').length).line;
      for (const e of doc.errors) problems.add({ file, line: Math.min(e.pos?.[0] !== undefined ? lines.linePos(e.pos[0]).line : start, last) }, `YAML: ${e.message.split('\n')[0]}`);
      continue;
    }
    if (doc.contents == null) continue;
    const lineAt = (p: readonly (string | number)[]) => {
      for (let n = p.length; n >= 0; n--) {
        const node = doc.getIn(p.slice(0, n), true) as { range?: [number, number, number] } | undefined;
        if (node?.range) return lines.linePos(node.range[0]).line;
      }
      return start;
    };
    const source = { file, line: isMap(doc.contents) || isSeq(doc.contents) ? lines.linePos(doc.contents.range![0]).line : start };
    const value = doc.toJS({ maxAliasCount: 1000 });
    // An empty document (a trailing `---`, as `helm template` writes; one holding only
    // comments, or `~`) declares nothing, as kubectl reads it.
    if (value == null) continue;
    if (typeof value !== 'object' || Array.isArray(value)) {
      problems.add(source, 'a manifest document must be a mapping with kind, name and the fields of that kind');
      continue;
    }
    let interpolationFailed = false;
    const interpolated = interpolate(value, path.dirname(path.resolve(file)), (p, message) => {
      interpolationFailed = true;
      problems.add({ file, line: lineAt(p) }, message);
    });
    out.push({ value: interpolated, source, lineAt, interpolationFailed });
  }
  return out;
}

export function loadManifests(paths: readonly string[], problems: Problems, opts: FileOptions = {}): RawDocument[] {
  const out: RawDocument[] = [];
  for (const file of manifestFiles(paths, problems, opts)) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (e) {
      problems.add({ file, line: 0 }, `cannot read: ${(e as Error).message}`);
      continue;
    }
    out.push(...parseManifestText(text, file, problems));
  }
  return out;
}
