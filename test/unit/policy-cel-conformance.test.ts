// CEL conformance for the part of the language a traffic policy uses, drawn from the
// conformance suite of the CEL specification (@bufbuild/cel-spec), run in the environment
// of an on_http_request expression. Only value and error expectations are compared; tests
// that need protobuf messages, bytes, uint, variables or containers are outside the subset.
import { describe, expect, it } from 'vitest';
import { tests } from '@bufbuild/cel-spec/testdata/conformance.js';
import { celEnvironment, parseCel } from '../../provider/catalog/validate/policy/cel.js';

/** The sections of the suite that make up the subset, by suite. */
const SUBSET: Record<string, string[]> = {
  comparisons: ['eq_literal', 'ne_literal', 'lt_literal', 'gt_literal', 'lte_literal', 'gte_literal', 'in_list_literal', 'in_map_literal'],
  logic: ['conditional', 'AND', 'OR', 'NOT'],
  macros: ['exists', 'all', 'exists_one', 'map', 'filter', 'nested'],
  lists: ['concatenation', 'index', 'in', 'size'],
  string: ['size', 'starts_with', 'ends_with', 'matches', 'concatenation', 'contains'],
  integer_math: ['int64_math'],
  timestamps: ['comparisons', 'timestamp_equality'],
};

/** Where the library departs from the suite, each documented in docs/traffic-policy.md. */
const KNOWN_DEVIATIONS: Record<string, string> = {
  'comparisons/gt_literal/not_gt_double': 'a double literal written without its leading zero (.99) does not parse',
  'integer_math/int64_math/int64_min_negate': 'negating the smallest int64 gives a value out of range instead of an overflow error',
  'integer_math/int64_math/int64_min_negate_div': 'dividing the smallest int64 by -1 gives a value out of range instead of an overflow error',
  'macros/all/list_empty': '[].all(e, e > 0) is refused by the type checker as ambiguous',
  'macros/exists_one/map_one': 'exists_one over a map with int keys mistypes the iteration variable',
};

interface Case { name: string; expr: string; want: { value: unknown } | { error: true } }

const OUTSIDE = /\bb['"]|\d+u\b|uint|bytes|double\(|dyn\(/;

function expected(v: Record<string, unknown>): { value: unknown } | undefined {
  if ('boolValue' in v) return { value: v.boolValue };
  if ('int64Value' in v) return { value: BigInt(v.int64Value as string) };
  if ('stringValue' in v) return { value: v.stringValue };
  if ('doubleValue' in v) return { value: Number(v.doubleValue) };
  return undefined;
}

function cases(): Case[] {
  const out: Case[] = [];
  for (const suite of (tests as any).suites) {
    for (const section of suite.suites ?? []) {
      if (!SUBSET[suite.name]?.includes(section.name)) continue;
      for (const t of section.tests) {
        const o = t.original;
        if (o.typeEnv || o.bindings || o.container || o.disableMacros || o.disableCheck || OUTSIDE.test(o.expr)) continue;
        const want = o.evalError ? ({ error: true } as const) : o.value ? expected(o.value) : undefined;
        if (want) out.push({ name: `${suite.name}/${section.name}/${o.name}`, expr: o.expr, want });
      }
    }
  }
  return out;
}

const all = cases();
const env = celEnvironment('on_http_request');

function run(expr: string): { value: unknown } | { error: true } {
  try {
    // As a policy runs it: `matches` on RE2, not the library's JavaScript RegExp.
    return { value: (parseCel(env, expr) as unknown as (vars: object) => unknown)({}) };
  } catch {
    return { error: true };
  }
}

describe('CEL conformance (the subset a traffic policy uses)', () => {
  it('draws a few hundred tests from the suite, from every section of the subset', () => {
    expect(all.length).toBeGreaterThan(250);
    for (const [suite, sections] of Object.entries(SUBSET)) for (const s of sections) expect(all.some((c) => c.name.startsWith(`${suite}/${s}/`)), `${suite}/${s}`).toBe(true);
  });

  it.each(all.filter((c) => !KNOWN_DEVIATIONS[c.name]).map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const got = run(c.expr);
    if ('value' in c.want && typeof c.want.value === 'number' && Number.isNaN(c.want.value)) expect(Number.isNaN((got as { value: number }).value)).toBe(true);
    else expect(got).toEqual(c.want);
  });

  it.each(Object.entries(KNOWN_DEVIATIONS))('known deviation %s still differs (%s)', (name) => {
    const c = all.find((x) => x.name === name);
    expect(c, name).toBeDefined();
    expect(run(c!.expr)).not.toEqual(c!.want);
  });
});
