// Problems found in manifests, each with the file and line it concerns, collected so that
// one run reports all of them rather than the first.
import path from 'node:path';

export interface Problem {
  file: string;
  line: number;
  message: string;
}

/** A path relative to the working directory when it lies beneath it, else as given. */
function shortPath(cwd: string, file: string) {
  const rel = path.relative(cwd, path.resolve(file));
  return rel && !rel.startsWith('..') ? rel : file;
}

export class Problems {
  readonly list: Problem[] = [];

  add(at: { file: string; line: number }, message: string) {
    this.list.push({ file: at.file, line: at.line, message });
  }

  get empty() {
    return this.list.length === 0;
  }

  /** `file:line: message` lines, paths relative to the working directory. */
  text(cwd = process.cwd()): string {
    return this.list
      .map((p) => `${p.file ? shortPath(cwd, p.file) : '<input>'}${p.line ? `:${p.line}` : ''}: ${p.message}`)
      .join('\n');
  }
}

/** Thrown when manifests cannot be used; carries every problem found. */
export class ManifestError extends Error {
  constructor(readonly problems: Problems) {
    super(`${problems.list.length} problem${problems.list.length === 1 ? '' : 's'} in the manifests:\n${problems.text()}`);
  }
}
