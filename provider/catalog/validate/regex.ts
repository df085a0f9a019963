// Patterns in RE2 syntax, the dialect of the service's traffic engine: a leading `(?flags)`
// group, `(?P<name>...)` groups, and no lookaround or backreferences. Checked by compiling
// with JavaScript's engine after mapping the RE2-only spellings onto it.

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

/** A pattern regexProblem accepts, as the JavaScript RegExp that matches the same. */
export function re2ToRegExp(pattern: string): RegExp {
  const lead = /^\(\?([imsU]+)\)/.exec(pattern);
  const flags = lead ? [...new Set(lead[1].replace(/U/g, ''))].join('') : '';
  return new RegExp((lead ? pattern.slice(lead[0].length) : pattern).replace(/\(\?P</g, '(?<'), flags);
}
