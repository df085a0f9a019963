// The one place zod issues become API errors (details.field is a JSON path).
import type { z } from 'zod';
import { pathText, schemaAt } from '../../provider/catalog/walk.js';
import { issueText } from '../../provider/catalog/issue-text.js';
import { shapeOf } from '../../provider/catalog/traits.js';
import { ApiError, type ErrorCode } from './errors.js';
import { nullsAsAbsent } from '../../provider/catalog/nulls.js';

type Issue = z.core.$ZodIssue;

function toError(schema: z.ZodType, issue: Issue, base: (string | number)[]): ApiError {
  const path = [...base, ...(issue.path as (string | number)[])];
  if (issue.code === 'unrecognized_keys') {
    const at = schemaAt(schema, issue.path);
    const supported = Object.keys((at && shapeOf(at)) ?? {});
    const field = pathText([...path, issue.keys[0]]);
    const reason = `unknown field ${issue.keys.map((k) => `"${k}"`).join(', ')}; supported fields: ${supported.join(', ') || 'none'}`;
    return new ApiError('ERR_SERVICE_102', path.length ? `${pathText(path)}: ${reason}` : reason, { field, reason, supported_fields: supported });
  }
  const field = pathText(path);
  const policyPath = (issue as { params?: { policyPath?: string } }).params?.policyPath;
  let reason = issueText(issue);
  if (policyPath !== undefined) reason = `${policyPath ? `${policyPath}: ` : ''}${reason}`;
  const details: Record<string, unknown> = { field, reason };
  if (policyPath !== undefined) details.policy_path = policyPath;
  // A refinement may name its own code (a combination of fields refused, not one bad value).
  const code = (issue as { params?: { errorCode?: ErrorCode } }).params?.errorCode ?? 'ERR_SERVICE_103';
  return new ApiError(code, field ? `${field}: ${reason}` : reason, details);
}

/**
 * Parses input with a catalog schema or throws the first problem as a 400 (unknown fields
 * first). A null given for an optional field that takes no null is read as absent.
 */
export function parseInput<T>(schema: z.ZodType<T>, input: unknown, base: (string | number)[] = []): T {
  const result = schema.safeParse(nullsAsAbsent(schema, input));
  if (result.success) return result.data;
  const issues = result.error.issues;
  const first = issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0];
  const error = toError(schema, first, base);
  if (issues.length > 1) {
    // At most the first 20: a map of 30,000 bad keys would otherwise answer a 30,000-line error.
    error.details.problems = issues.slice(0, 20).map((i) => {
      const e = toError(schema, i, base);
      return { field: e.details.field, reason: e.details.reason };
    });
  }
  throw error;
}
