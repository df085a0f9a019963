// Patterns in RE2 syntax, the dialect of the service's traffic engine: a leading `(?flags)`
// group, `(?P<name>...)` groups, and no lookaround or backreferences. Checked by compiling
// with JavaScript's engine after mapping the RE2-only spellings onto it.
import { RE2JS } from 're2js';

/** Why a pattern is not a valid RE2 expression, or undefined when it is. */
export function regexProblem(pattern: string): string | undefined {
  const lead = /^\(\?([imsU]+)\)/.exec(pattern);
  const flags = lead ? [...new Set(lead[1].replace(/U/g, ''))].join('') : '';
  let body = lead ? pattern.slice(lead[0].length) : pattern;
  let inClass = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '\\') {
      if (!inClass && /[1-9]/.test(body[i + 1] ?? '')) return 'backreferences (\\1) are not supported';
      i++;
    } else if (inClass) {
      if (c === ']') inClass = false;
    } else if (c === '[') {
      inClass = true;
      if (body[i + 1] === ']') i++;
    } else if (c === '(' && /^\(\?<?[=!]/.test(body.slice(i, i + 4))) {
      return 'lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported';
    }
  }
  body = body.replace(/\(\?P</g, '(?<');
  try {
    new RegExp(body, flags);
    return undefined;
  } catch (e) {
    return (e as Error).message.replace(/^Invalid regular expression: /, '');
  }
}

/**
 * A pattern run by RE2 (re2js), in time linear in the text. JavaScript's RegExp backtracks:
 * a `from` like `^/(a|aa)+$` against a request path of a few dozen `a` and a `!` never ended,
 * and the path is the client's to choose. `exec` and `replace` behave as RegExp's do on the
 * first match, with `to` spelt as String.prototype.replace spells it ($1, $<name>, $&, $$).
 */
export class Re2Pattern {
  readonly re: RE2JS;
  constructor(readonly source: string) {
    this.re = RE2JS.compile(source);
  }

  /** The first match: its start, its text and the groups' texts (undefined when a group took no part). */
  exec(text: string): { index: number; groups: (string | undefined)[]; named: Record<string, string | undefined> } | null {
    const m = this.re.matcher(text);
    if (!m.find()) return null;
    const groups = Array.from({ length: m.groupCount() + 1 }, (_, i) => m.group(i) ?? undefined);
    const named = Object.fromEntries(Object.entries(this.re.namedGroups()).map(([name, i]) => [name, groups[i]]));
    return { index: m.start(), groups, named };
  }

  /** `to` expanded with the first match's groups, or null when nothing matches. */
  expandFirst(text: string, to: string): string | null {
    const m = this.exec(text);
    return m && expand(to, m, text, m.index + m.groups[0]!.length);
  }

  /** The text with its first match replaced by `to` expanded; the text itself when nothing matches. */
  replace(text: string, to: string): string {
    const m = this.exec(text);
    if (!m) return text;
    const end = m.index + m.groups[0]!.length;
    return text.slice(0, m.index) + expand(to, m, text, end) + text.slice(end);
  }
}

function expand(to: string, m: NonNullable<ReturnType<Re2Pattern['exec']>>, text: string, end: number): string {
  const count = m.groups.length - 1;
  return to.replace(/\$(\$|&|`|'|<([^>]*)>|(\d\d?))/g, (all, what: string, name: string | undefined, digits: string | undefined) => {
    if (what === '$') return '$';
    if (what === '&') return m.groups[0]!;
    if (what === '`') return text.slice(0, m.index);
    if (what === "'") return text.slice(end);
    if (name !== undefined) return Object.keys(m.named).length ? (m.named[name] ?? '') : all;
    let n = Number(digits);
    let rest = '';
    if (n > count && digits!.length === 2) {
      rest = digits![1];
      n = Number(digits![0]);
    }
    return n >= 1 && n <= count ? (m.groups[n] ?? '') + rest : all;
  });
}
