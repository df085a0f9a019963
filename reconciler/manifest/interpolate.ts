// `${env:NAME}` and `${file:relative/path}` in manifest strings: secrets and PEMs stay out
// of the files under version control. `$${` writes a literal `${`.
import fs from 'node:fs';
import path from 'node:path';

type Report = (path: (string | number)[], message: string) => void;

const PATTERN = /\$(\$)?\{([a-z]+):([^}]*)\}/g;

function expand(text: string, baseDir: string, at: (string | number)[], report: Report): string {
  return text.replace(PATTERN, (whole, escaped: string | undefined, source: string, arg: string) => {
    if (escaped) return whole.slice(1);
    if (source === 'env') {
      const v = process.env[arg];
      if (v === undefined) {
        report(at, `environment variable ${arg} is not set (referenced as \${env:${arg}}); export it before running edgeform`);
        return '';
      }
      return v;
    }
    if (source === 'file') {
      const file = path.resolve(baseDir, arg);
      try {
        return fs.readFileSync(file, 'utf8');
      } catch (e) {
        report(at, `cannot read ${file} (referenced as \${file:${arg}}): ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}; paths are relative to the manifest file`);
        return '';
      }
    }
    report(at, `unknown interpolation \${${source}:...}; use \${env:NAME} or \${file:path} (write $\${ for a literal \${)`);
    return whole;
  });
}

/** The value with every string interpolated; keys are interpolated too (weighted backends key by id). */
export function interpolate(value: unknown, baseDir: string, report: Report, at: (string | number)[] = []): any {
  if (typeof value === 'string') return expand(value, baseDir, at, report);
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, baseDir, report, [...at, i]));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [expand(k, baseDir, at, report), interpolate(v, baseDir, report, [...at, k])]));
  }
  return value;
}
