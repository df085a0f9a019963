// Which stack a run manages: `--stack` (or EDGEFORM_STACK), else the `stack:` of the
// `edgeform.yaml` beside the manifests, else the implicit `default` that every directory
// shares. A directory that names its stack cannot be pruned or destroyed by a run over
// another directory; the CLI refuses --prune and destroy on a stack nobody named.
import fs from 'node:fs';
import path from 'node:path';
import { isMap, LineCounter, parseDocument } from 'yaml';

/** The file that names a directory's stack. It is never read as a manifest. */
export const STACK_FILES = ['edgeform.yaml', 'edgeform.yml'];
export const isStackFile = (file: string) => STACK_FILES.includes(path.basename(file).toLowerCase());

export const DEFAULT_STACK = 'default';
export const STACK_PATTERN = /^[a-z0-9._-]{1,64}$/i;

export interface StackChoice {
  stack: string;
  /** Named by --stack, EDGEFORM_STACK or an edgeform.yaml; false for the implicit default. */
  named: boolean;
  /** Where the name came from, for messages. */
  from?: string;
}

/** A stack file that cannot be used, or two sources naming different stacks. */
export class StackNameError extends Error {
  constructor(
    message: string,
    /** The user's own options disagree (a usage error), rather than a file being wrong. */
    readonly usage = false,
  ) {
    super(message);
  }
}

/** The stack files that apply to the -f paths: in each directory given (and below), and beside each file given. */
function stackFilesFor(paths: readonly string[]): string[] {
  const found = new Set<string>();
  const besides = (dir: string) => {
    for (const name of STACK_FILES) if (fs.existsSync(path.join(dir, name))) found.add(path.join(dir, name));
  };
  const walk = (dir: string) => {
    besides(dir);
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((x, y) => x.name.localeCompare(y.name))) if (e.isDirectory()) walk(path.join(dir, e.name));
  };
  for (const p of paths) {
    let stat: fs.Stats;
    try {
      stat = fs.statSync(p);
    } catch {
      continue; // reported by the manifest loader
    }
    if (stat.isDirectory()) walk(p);
    else if (isStackFile(p)) found.add(p);
    else besides(path.dirname(p));
  }
  return [...found];
}

/** The stack an edgeform.yaml names. */
export function readStackFile(file: string): string {
  const text = fs.readFileSync(file, 'utf8');
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const at = (pos?: number) => `${file}:${pos === undefined ? 1 : lines.linePos(pos).line}`;
  if (doc.errors.length) throw new StackNameError(`${at(doc.errors[0].pos?.[0])}: YAML: ${doc.errors[0].message.split('\n')[0]}`);
  if (!isMap(doc.contents)) throw new StackNameError(`${at()}: an edgeform.yaml is a mapping with one key, stack (for example "stack: payments"), not a manifest`);
  const value = doc.toJS() as Record<string, unknown>;
  for (const item of doc.contents.items) {
    const key = item.key as { value?: unknown; range?: number[] } | null;
    if (key?.value !== 'stack') throw new StackNameError(`${at(key?.range?.[0])}: unknown key ${JSON.stringify(key?.value ?? null)}; an edgeform.yaml has one key, stack`);
  }
  const stack = value.stack;
  if (typeof stack !== 'string' || !STACK_PATTERN.test(stack)) {
    throw new StackNameError(`${at()}: stack must be a name of 1-64 letters, digits, '.', '_' or '-' (for example "stack: payments"), not ${JSON.stringify(stack ?? null)}`);
  }
  return stack;
}

/**
 * The run's stack. `flag` is --stack or EDGEFORM_STACK (undefined when neither is set);
 * `paths` are the -f paths. Two sources naming different stacks is an error naming both.
 */
export function chooseStack(flag: string | undefined, paths: readonly string[]): StackChoice {
  let fromFile: { stack: string; file: string } | undefined;
  for (const file of stackFilesFor(paths)) {
    const stack = readStackFile(file);
    if (fromFile && fromFile.stack !== stack) {
      throw new StackNameError(`${fromFile.file} names stack "${fromFile.stack}" and ${file} names stack "${stack}"; one run manages one stack: give -f the directories of one stack`);
    }
    fromFile ??= { stack, file };
  }
  if (flag !== undefined) {
    if (fromFile && fromFile.stack !== flag) {
      throw new StackNameError(`--stack (or EDGEFORM_STACK) names stack "${flag}", but ${fromFile.file} names stack "${fromFile.stack}"; remove one, or make them agree`, true);
    }
    return { stack: flag, named: true, from: '--stack' };
  }
  if (fromFile) return { stack: fromFile.stack, named: true, from: fromFile.file };
  return { stack: DEFAULT_STACK, named: false };
}

/** Why --prune or destroy is refused on a stack nobody named. */
export function unnamedStackMessage(what: string): string {
  return `${what} on the implicit stack "${DEFAULT_STACK}", which every directory shares, would delete what runs over other directories applied; name the stack: put "stack: NAME" in an edgeform.yaml beside the manifests, or pass --stack NAME (or set EDGEFORM_STACK)`;
}
