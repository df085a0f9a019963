// Parsers that never meet unbounded input. A document field (a traffic policy's YAML or
// JSON) and the request body itself are measured before, or instead of, a recursive walk:
// size, nesting depth and YAML aliases. Past the bounds a parser recurses until V8 runs out
// of stack (a fatal error, not an exception, when it happens inside a regular expression
// compile) or expands aliases without end; here the answer is a message to show instead.
import { Lexer, parseDocument } from 'yaml';

export interface DocumentLimits {
  /** Largest document, in UTF-8 bytes. */
  maxBytes: number;
  /** Deepest nesting of collections (block indentation levels plus flow brackets). */
  maxDepth: number;
  /** Most aliases (`*name`) in the text. */
  maxAliases: number;
  /** yaml's maxAliasCount: how far aliases may expand (uses times the aliases inside what they name). */
  maxAliasExpansion: number;
}

/** Far beyond any real traffic policy (a rule sits 4 to 6 levels deep), far below a stack overflow. */
export const DOCUMENT_LIMITS: DocumentLimits = { maxBytes: 65536, maxDepth: 64, maxAliases: 100, maxAliasExpansion: 1000 };

export type Bounded<T> = { ok: true; value: T } | { ok: false; message: string };

interface Shape { depth: number; aliases: number }

/**
 * The nesting depth and alias count of a YAML (or JSON) text, from the tokens of yaml's
 * lexer, which is iterative and reads quotes, block scalars and comments as the parser does.
 * Block depth counts indentation levels and the `- ` / `? ` indicators that open a
 * collection on the same line; flow depth counts open brackets. It never undercounts.
 */
function measure(text: string, limits: DocumentLimits): Shape {
  const indents: number[] = [];
  let flow = 0;
  let lineDepth = 0;
  let atLineStart = true;
  let indicators = 0;
  let depth = 0;
  let aliases = 0;
  for (const token of new Lexer().lex(text)) {
    if (token === '\n' || token === '\r\n') {
      atLineStart = true;
      indicators = 0;
      continue;
    }
    if (atLineStart && flow === 0) {
      // The first token of a line: its indentation (or none) sets the block level.
      const indent = /^ +$/.test(token) ? token.length : 0;
      while (indents.length && indents[indents.length - 1] >= indent) indents.pop();
      indents.push(indent);
      atLineStart = false;
      lineDepth = indents.length;
      if (indent > 0) continue;
    }
    atLineStart = false;
    if (token === '-' || token === '?') lineDepth = indents.length + ++indicators;
    else if (token === '[' || token === '{') flow++;
    else if ((token === ']' || token === '}') && flow > 0) flow--;
    else if (token.startsWith('*')) aliases++;
    depth = Math.max(depth, lineDepth + flow);
    if (depth > limits.maxDepth || aliases > limits.maxAliases) break;
  }
  return { depth, aliases };
}

/** Why a document text is out of bounds, or undefined when it is within them. */
export function documentBoundsProblem(text: string, limits: DocumentLimits = DOCUMENT_LIMITS): string | undefined {
  if (text.length > limits.maxBytes || Buffer.byteLength(text) > limits.maxBytes) return `the document is larger than ${limits.maxBytes} bytes`;
  const { depth, aliases } = measure(text, limits);
  if (depth > limits.maxDepth) return `the document is nested more than ${limits.maxDepth} levels deep`;
  if (aliases > limits.maxAliases) return `the document has more than ${limits.maxAliases} aliases (*name)`;
  return undefined;
}

/**
 * Parses one YAML (or JSON) document within the limits: its plain value, or why not.
 * Duplicate keys are refused; alias expansion stops at `maxAliasExpansion`.
 */
export function parseBoundedYaml(text: string, limits: DocumentLimits = DOCUMENT_LIMITS): Bounded<unknown> {
  const problem = documentBoundsProblem(text, limits);
  if (problem) return { ok: false, message: problem };
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) return { ok: false, message: `not valid YAML or JSON: ${doc.errors[0].message.split('\n')[0]}` };
  try {
    return { ok: true, value: doc.toJS({ maxAliasCount: limits.maxAliasExpansion }) };
  } catch (e) {
    // yaml throws (a ReferenceError) when aliases would expand past maxAliasCount.
    return { ok: false, message: `the document's aliases expand too far (${(e as Error).message})` };
  }
}

export interface JsonLimits {
  /** Deepest nesting of objects and arrays. */
  maxDepth: number;
}

/** The request body: catalog bodies are at most 6 levels deep. */
export const BODY_LIMITS: JsonLimits = { maxDepth: 32 };

export interface ValueProblem {
  /** Where, as object keys and list indexes from the root. */
  path: (string | number)[];
  message: string;
}

/** The keys JSON.parse keeps as own properties that an assignment (`o[k] = v`) would turn into a prototype change. */
const PROTO_KEY = '__proto__';

/**
 * Walks a parsed JSON value without recursion and names the first thing a server cannot
 * hold: nesting past `maxDepth`, a `__proto__` key, or a string (key or value) with a NUL
 * or a lone UTF-16 surrogate (PostgreSQL stores neither in text; UTF-8 cannot encode a
 * lone surrogate), so every database gives the same answer.
 */
export function jsonValueProblem(root: unknown, limits: JsonLimits = BODY_LIMITS): ValueProblem | undefined {
  interface Frame { value: unknown; key: string | number | undefined; parent: Frame | undefined; depth: number }
  const pathOf = (f: Frame | undefined, extra: (string | number)[] = []) => {
    const out = [...extra];
    for (let cur = f; cur && cur.key !== undefined; cur = cur.parent) out.unshift(cur.key);
    return out;
  };
  const stack: Frame[] = [{ value: root, key: undefined, parent: undefined, depth: 0 }];
  while (stack.length) {
    const frame = stack.pop()!;
    const { value } = frame;
    if (typeof value === 'string') {
      const problem = stringProblem(value);
      if (problem) return { path: pathOf(frame), message: problem };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (frame.depth >= limits.maxDepth) {
      // Name the outermost field: the full path is as long as the nesting.
      return { path: pathOf(frame).slice(0, 1), message: `is nested more than ${limits.maxDepth} levels deep` };
    }
    const depth = frame.depth + 1;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], key: i, parent: frame, depth });
      continue;
    }
    const keys = Object.keys(value);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i];
      if (key === PROTO_KEY) return { path: pathOf(frame, [key]), message: `a key named ${PROTO_KEY} is not accepted` };
      const problem = stringProblem(key);
      if (problem) return { path: pathOf(frame, [key]), message: `the key ${problem}` };
      stack.push({ value: (value as Record<string, unknown>)[key], key, parent: frame, depth });
    }
  }
  return undefined;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why a string cannot be stored as text on every database, or undefined. */
export function stringProblem(s: string): string | undefined {
  if (s.includes('\u0000')) return 'contains a NUL character (U+0000), which cannot be stored';
  if (LONE_SURROGATE.test(s)) return 'contains a lone UTF-16 surrogate (not valid Unicode), which cannot be stored';
  return undefined;
}
