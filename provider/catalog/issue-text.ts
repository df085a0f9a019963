// The words for a zod issue, shared by the API's 400s, `edgeform validate` and Terraform's
// diagnostics, so the same mistake reads the same everywhere.
import type { z } from 'zod';

/** An issue's message; a missing value says it is required rather than zod's "received undefined". */
export function issueText(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) return `is required (${issue.expected})`;
  return issue.message;
}
