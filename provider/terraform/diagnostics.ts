// Problems as Terraform diagnostics: API errors keep the server's message and operation
// id, validation issues and API `details.field` paths point at the configuration line.
import type { z } from 'zod';
import { issueText } from '../catalog/issue-text.js';
import { ApiClientError, NO_SUCH_PATH } from '../client/index.js';
import type { BlockNode, ObjectNode } from './schema.js';

export interface Step {
  attribute_name?: string;
  element_key_string?: string;
  element_key_int?: number;
}

export interface Diagnostic {
  severity: 'ERROR' | 'WARNING';
  summary: string;
  detail: string;
  attribute?: { steps: Step[] };
}

/** `routes[0].oauth.provider.github` -> ['routes', 0, 'oauth', 'provider', 'github']. */
export const splitPath = (text: string): (string | number)[] =>
  (text.match(/[^.[\]]+/g) ?? []).map((p) => (/^\d+$/.test(p) ? Number(p) : p));

/**
 * Attribute path steps for a body path, following the schema so that map keys and list
 * indexes get the right step kind; stops where the path leaves the schema.
 */
export function stepsFor(node: ObjectNode, path: readonly PropertyKey[]): Step[] {
  const steps: Step[] = [];
  let cur: ObjectNode | undefined = node;
  for (let i = 0; i < path.length && cur; i++) {
    const name = String(path[i]);
    const block: BlockNode | undefined = cur.blocks.find((b) => b.name === name);
    if (block) {
      steps.push({ attribute_name: name });
      if (block.nesting === 'list') {
        if (typeof path[i + 1] !== 'number') break;
        steps.push({ element_key_int: path[++i] as number });
      }
      cur = block.block;
      continue;
    }
    const attr = cur.attributes.find((a) => a.name === name);
    if (!attr) break;
    steps.push({ attribute_name: name });
    const next = path[i + 1];
    if (next !== undefined && Array.isArray(attr.type)) {
      if (attr.type[0] === 'map') steps.push({ element_key_string: String(next) });
      else if (typeof next === 'number') steps.push({ element_key_int: next });
    }
    break;
  }
  return steps;
}

const at = (node: ObjectNode, path: readonly PropertyKey[]) => {
  const steps = stepsFor(node, path);
  return steps.length ? { attribute: { steps } } : {};
};

export function error(summary: string, detail = '', node?: ObjectNode, path?: readonly PropertyKey[]): Diagnostic {
  return { severity: 'ERROR', summary, detail, ...(node && path ? at(node, path) : {}) };
}

/** A zod issue from validating a create body against the catalog. */
export function issueDiagnostic(node: ObjectNode, issue: z.core.$ZodIssue, base: readonly PropertyKey[] = []): Diagnostic {
  const path = [...base, ...issue.path];
  // A traffic policy's checker names the place inside the policy too (on_http_request[0].actions[0].type).
  const inner = (issue as { params?: { policyPath?: string } }).params?.policyPath;
  const named = [...path, ...(inner ? [inner] : [])];
  const where = named.length ? `${named.join('.')}: ` : '';
  const keys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
  return error('Invalid configuration', `${where}${issueText(issue)}${keys}`, node, path);
}

/** Any failure of an API call, as one diagnostic. */
export function failureDiagnostic(node: ObjectNode, what: string, e: unknown): Diagnostic {
  if (e instanceof ApiClientError) {
    const field = typeof e.details.field === 'string' ? e.details.field : undefined;
    const detail = [
      `The edgeform API answered ${e.method} ${e.path} with ${e.status}${e.code ? ` ${e.code}` : ''}: ${e.serverMessage}`,
      e.operationId ? `Operation id: ${e.operationId} (the server's log line for the request carries it).` : '',
      // The next step for a key the server does not accept is in the provider's settings, not the resource.
      e.status === 401 ? 'Check api_key in the provider "edgeform" block (or EDGEFORM_API_KEY): it must be the token of an API key that still exists.' : '',
      e.code === NO_SUCH_PATH ? 'Set api_url (or EDGEFORM_API_URL) to the server\'s base URL, with no path, e.g. http://127.0.0.1:8080.' : '',
    ].filter(Boolean).join('\n');
    return error(`${what}: ${e.serverMessage}`, detail, node, field ? splitPath(field) : undefined);
  }
  const message = e instanceof Error ? e.message : String(e);
  const cause = (e as { cause?: { code?: string } })?.cause?.code;
  return error(`${what}: ${message}${cause ? ` (${cause})` : ''}`, 'Check api_url (or EDGEFORM_API_URL) and that the edgeform server is running.');
}
