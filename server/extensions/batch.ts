// The batch: a server extension outside SPEC's resources (docs/api.md, "Batches"). Up to
// BATCH_MAX_OPERATIONS creates, updates and deletes in one request, run one after another in
// order, each exactly as the same request sent alone (the same route, validation,
// transaction, events and routing-table change) and answered on its own. The reconciler's
// apply sends its writes this way: at the default 600 requests a minute per key, 5,000
// single writes took over eight minutes, and a batch counts against that limit one request
// per OPERATIONS_PER_REQUEST operations (the per-request costs it saves, measured in
// bench/README.md, "Batches"), so the same 5,000 fit in one minute's allowance.
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { ApiError } from '../http/errors.js';
import { errorBody } from '../http/reply.js';
import { parseInput } from '../http/validation.js';
import type { Ctx } from '../resources/context.js';
import { apiRoutes, extraRoute, type ApiRoute, type Method, type NestedOperations } from '../resources/routes.js';
import { newIdBody } from '../store/ids.js';

export const BATCH_PATH = '/_edgeform/batch';
/** Top-level fields of one operation's body at most: more than any resource has (each route then checks its own). */
const MAX_BODY_FIELDS = 200;
/** Operations in one batch at most (the body's 1 MiB bound applies too). */
export const BATCH_MAX_OPERATIONS = 100;
/** A batch counts as one request against the API rate limit per this many operations, rounded up. */
export const OPERATIONS_PER_REQUEST = 10;
/** As the API's router: a path segment (an id) longer than this is refused. */
const MAX_SEGMENT = 100;

const METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;

const request = z.strictObject({
  operations: z
    .array(
      z.strictObject({
        method: z.enum(METHODS).describe('POST (create), PATCH (update), PUT (a module) or DELETE.'),
        path: z.string().min(1).max(2048).describe('The path the same request would have alone, such as /ip_policies or /edges/https/edghts_…/routes/edghtsrt_…/ip_restriction; no query.'),
        body: z
          .record(z.string().max(255), z.unknown())
          .refine((m) => Object.keys(m).length <= MAX_BODY_FIELDS, `at most ${MAX_BODY_FIELDS} fields`)
          .meta({ maxProperties: MAX_BODY_FIELDS })
          .optional()
          .describe('The request body the same request would have alone (none for DELETE); its own route checks it as it would alone.'),
      }),
    )
    .min(1)
    .max(BATCH_MAX_OPERATIONS)
    .describe(`1 to ${BATCH_MAX_OPERATIONS} operations, run in this order.`),
});

const result = z.object({
  status: z.number().int().describe('The status the request alone would have had: 201, 200, 204, or an error\'s.'),
  operation_id: z.string().describe('This operation\'s own id (its line in the request log, and details.operation_id of its error).'),
  body: z.unknown().optional().describe('The answer the request alone would have had: the resource, or the error body; absent for 204.'),
});
const response = z.object({ results: z.array(result).describe('One result per operation, in order.') });

/** The operations a batch body holds, for its weight before it is validated (1 for a body that is not a batch). */
function weightOf(body: unknown): number {
  const ops = (body as { operations?: unknown } | null | undefined)?.operations;
  const n = Array.isArray(ops) ? Math.min(ops.length, BATCH_MAX_OPERATIONS) : 0;
  return Math.max(1, Math.ceil(n / OPERATIONS_PER_REQUEST));
}

interface Template {
  route: ApiRoute;
  segments: string[];
}

/** Every route's path split into segments, by how many it has (made on the first batch: the routes are all registered by then). */
let templates: Map<number, Template[]> | undefined;
function templatesBySize(): Map<number, Template[]> {
  if (templates) return templates;
  templates = new Map();
  for (const route of apiRoutes()) {
    const segments = route.path.split('/').slice(1);
    const list = templates.get(segments.length) ?? [];
    list.push({ route, segments });
    templates.set(segments.length, list);
  }
  return templates;
}

/** The route an operation's method and path name, with its path parameters, or the error the request alone would get. */
function routeOf(method: Method, path: string): { route: ApiRoute; params: Record<string, string>; template: string } {
  if (path.includes('?') || path.includes('#')) throw new ApiError('ERR_SERVICE_104', `a batch operation's path takes no query: ${path.slice(0, 200)}`, { field: 'path' });
  if (!path.startsWith('/')) throw new ApiError('ERR_SERVICE_301', `no such path: ${method} ${path.slice(0, 200)}`);
  // As the API's router: one trailing slash is ignored.
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  let segments: string[];
  try {
    segments = trimmed.split('/').slice(1).map((s) => decodeURIComponent(s));
  } catch {
    throw new ApiError('ERR_SERVICE_109', 'the path is not valid (check its percent-encoding)');
  }
  const allowed = new Set<Method>();
  for (const t of templatesBySize().get(segments.length) ?? []) {
    const params: Record<string, string> = {};
    let match = true;
    for (let i = 0; i < segments.length && match; i++) {
      const want = t.segments[i];
      if (want.startsWith('{')) {
        if (!segments[i]) match = false;
        else params[want.slice(1, -1)] = segments[i];
      } else match = want === segments[i];
    }
    if (!match) continue;
    if (t.route.method !== method) {
      allowed.add(t.route.method);
      continue;
    }
    if (Object.values(params).some((v) => v.length > MAX_SEGMENT)) throw new ApiError('ERR_SERVICE_109', `a path segment is longer than ${MAX_SEGMENT} characters; no id is that long`);
    if (!t.route.batchable) throw new ApiError('ERR_SERVICE_114', `${method} ${t.route.path} cannot be part of a batch: only creates, updates and deletes of resources and their modules can; send it as a request of its own`);
    return { route: t.route, params, template: `/${t.segments.map((s) => (s.startsWith('{') ? `:${s.slice(1, -1)}` : s)).join('/')}` };
  }
  if (allowed.size) {
    const allow = [...allowed].join(', ');
    throw new ApiError('ERR_SERVICE_310', `${method} is not allowed on ${path.slice(0, 200)}; allowed: ${allow}`, { allow });
  }
  throw new ApiError('ERR_SERVICE_301', `no such path: ${method} ${path.slice(0, 200)}`);
}

/** One operation, carried out as its request alone would be: its result. */
async function runOne(ctx: Ctx, nested: NestedOperations, op: { method: Method; path: string; body?: unknown }, index: number) {
  const operationId = `op_${newIdBody()}`;
  const started = performance.now();
  let template = 'unmatched';
  try {
    const { route, params, template: t } = routeOf(op.method, op.path);
    template = t;
    if (op.method === 'DELETE' && op.body !== undefined) throw new ApiError('ERR_SERVICE_103', `operations[${index}].body: a DELETE takes no body`, { field: `operations[${index}].body` });
    const out = await route.handle(ctx, { params, query: {}, body: op.method === 'DELETE' ? undefined : op.body });
    nested.done(op.method, op.path, template, route.status, performance.now() - started, operationId);
    return route.status === 204 ? { status: 204, operation_id: operationId } : { status: route.status, operation_id: operationId, body: out };
  } catch (e) {
    const error = nested.errorOf(e, operationId);
    const body = errorBody(error, operationId);
    // What a request alone would carry in Retry-After is in its details.
    const retry = error.headers['Retry-After'];
    const details: Record<string, unknown> = body.details;
    if (retry !== undefined && details.retry_after === undefined) details.retry_after = Number(retry);
    nested.done(op.method, op.path, template, error.status, performance.now() - started, operationId);
    return { status: error.status, operation_id: operationId, body };
  }
}

extraRoute({
  method: 'POST',
  path: BATCH_PATH,
  summary: `Run up to ${BATCH_MAX_OPERATIONS} creates, updates and deletes in order, each answered on its own; counts one request per ${OPERATIONS_PER_REQUEST} operations against the API rate limit (edgeform extension)`,
  tag: 'Extensions',
  request,
  status: 200,
  response,
  weight: weightOf,
  handle: async (ctx, req) => {
    if (!req.body || typeof req.body !== 'object' || Array.isArray(req.body)) throw new ApiError('ERR_SERVICE_100', 'the request body must be a JSON object');
    parseInput(request, req.body);
    // The operations as sent (the parsed copy's bodies would be zod's copies).
    const ops = (req.body as { operations: { method: Method; path: string; body?: unknown }[] }).operations;
    const nested = req.nested!;
    const results = [];
    for (const [i, op] of ops.entries()) results.push(await runOne(ctx, nested, op, i));
    return { results };
  },
});
