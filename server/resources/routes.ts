// The server's route table, derived from the catalog (plus the few extra routes that
// families register). Registration and the OpenAPI document both read this table.
import type { z } from 'zod';
import { catalog, type KindEntry } from '../../provider/catalog/index.js';
import { ApiError } from '../http/errors.js';
import { filterOf } from '../http/list-filter.js';
import { envelope, LIST_QUERY, pageOf } from '../http/paging.js';
import { isIdOf } from '../store/ids.js';
import type { Ctx } from './context.js';
import { createResource, deleteModule, deleteResource, getModule, getResource, label, listResources, putModule, updateResource } from './engine.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RouteRequest {
  params: Record<string, string>;
  query: Record<string, string | string[] | undefined>;
  body: unknown;
  /** For a route that carries out other routes' operations (the batch): given by the app, not the client. */
  nested?: NestedOperations;
}

/** How the app answers and records operations a route carries out, each as if it were a request of its own. */
export interface NestedOperations {
  /** The carrying request's operation id. */
  operationId: string;
  /** The API error a thrown error is answered with, as a request's would be (a fault is logged, with `operationId`). */
  errorOf(e: unknown, operationId: string): ApiError;
  /** One operation's request-log line and metrics, as a request's (its line also names the carrying request). */
  done(method: string, path: string, template: string, status: number, ms: number, operationId: string): void;
}

export interface ApiRoute {
  method: Method;
  /** OpenAPI-style path with `{param}`s. */
  path: string;
  summary: string;
  kind?: KindEntry;
  /** Query parameters accepted; anything else is 400. */
  query: readonly string[];
  request?: z.ZodType;
  /** The body is ignored whatever it is, even if not JSON (DECISIONS: agent commands). */
  ignoresBody?: boolean;
  /** The 2xx status and the response schema (none for 204). */
  status: 200 | 201 | 204;
  response?: z.ZodType;
  /** Response key of list envelopes. */
  envelope?: string;
  tag: string;
  /** A create, update or delete of a resource or module: may be one operation of a batch (server/extensions/batch.ts). */
  batchable?: boolean;
  /** How many requests this one counts against the API rate limit, from its body (default 1; the batch: docs/api.md). */
  weight?(body: unknown, ctx: Ctx): number;
  handle(ctx: Ctx, req: RouteRequest): Promise<unknown>;
}

/** The path parameters naming ids of a kind's routes, with the kind each must be of (worked out once per kind). */
const idParams = new Map<KindEntry, [string, KindEntry][]>();

/** Checks the prefixes of path ids: a wrong prefix is 400, not 404. */
function checkIds(kind: KindEntry, params: Record<string, string>) {
  let expect = idParams.get(kind);
  if (!expect) {
    expect = [['id', kind]];
    if (kind.parent?.in === 'path') expect.push([kind.parent.field, catalog.find((k) => k.kind === kind.parent!.kind)!]);
    idParams.set(kind, expect);
  }
  for (const [name, k] of expect) {
    if (params[name] !== undefined && !isIdOf(k.prefix, params[name])) {
      throw new ApiError('ERR_SERVICE_105', `${name}: "${params[name]}" is not an id of ${label(k)} (ids start with ${k.prefix}_)`, { field: name });
    }
  }
}

/** "an IP policy", "a TLS edge", "an event destination": acronyms by how their first letter sounds. */
export function withArticle(phrase: string): string {
  const first = phrase.split(' ')[0];
  const vowelSound = /^[A-Z]{2,}$/.test(first) ? /^[AEFHILMNORSX]/.test(first) : /^[aeio]/i.test(first);
  return `${vowelSound ? 'an' : 'a'} ${phrase}`;
}

export const plural = (phrase: string) => (/[^aeiou]y$/.test(phrase) ? `${phrase.slice(0, -1)}ies` : `${phrase}s`);

const parentOf = (kind: KindEntry, params: Record<string, string>) => (kind.parent?.in === 'path' ? params[kind.parent.field] : undefined);

function kindRoutes(kind: KindEntry): ApiRoute[] {
  const routes: ApiRoute[] = [];
  const ops = new Set(kind.operations);
  const item = `${kind.path}/{id}`;
  const tag = kind.kind;
  const k = label(kind);
  const aK = withArticle(k);
  const add = (r: Omit<ApiRoute, 'kind' | 'tag' | 'query'> & { query?: readonly string[] }) =>
    routes.push({ kind, tag, query: [], ...r, batchable: r.method !== 'GET', handle: (ctx, req) => { checkIds(kind, req.params); return r.handle(ctx, req); } });
  if (ops.has('create')) {
    add({ method: 'POST', path: kind.path, summary: `Create ${aK}`, request: kind.create, status: 201, response: kind.read, handle: (ctx, req) => createResource(ctx, kind, req.body, req.params) });
  }
  if (ops.has('list') && kind.envelope) {
    add({
      method: 'GET',
      path: kind.path,
      summary: `List ${plural(k)}, newest first`,
      query: [...LIST_QUERY, 'filter'],
      status: 200,
      response: kind.read,
      envelope: kind.envelope,
      handle: async (ctx, req) => {
        const { limit, beforeId } = pageOf(req.query, kind.prefix);
        const filter = filterOf(req.query);
        const page = await listResources(ctx, kind, limit, beforeId, filter);
        const next = envelope(kind.envelope!, page.items, `${ctx.publicUrl}${kind.path}`, page.more, page.lastId, limit);
        // The next page keeps the filter.
        if (filter && typeof next.next_page_uri === 'string') next.next_page_uri += `&filter=${encodeURIComponent(req.query.filter as string)}`;
        return next;
      },
    });
  }
  if (ops.has('read')) {
    add({ method: 'GET', path: item, summary: `Get ${aK}`, status: 200, response: kind.read, handle: (ctx, req) => getResource(ctx, kind, req.params.id, parentOf(kind, req.params)) });
  }
  if (ops.has('update')) {
    add({ method: 'PATCH', path: item, summary: `Update ${aK} (absent fields are unchanged)`, request: kind.update, status: 200, response: kind.read, handle: (ctx, req) => updateResource(ctx, kind, req.params.id, req.body, req.params) });
  }
  if (ops.has('delete')) {
    add({ method: 'DELETE', path: item, summary: `Delete ${aK}`, status: 204, handle: async (ctx, req) => { await deleteResource(ctx, kind, req.params.id, parentOf(kind, req.params)); } });
  }
  for (const m of Object.values(kind.modules)) {
    const at = `${item}/${m.name}`;
    add({ method: 'PUT', path: at, summary: `Replace the ${m.name} module of ${aK}`, request: m.schema, status: 200, response: m.read, handle: (ctx, req) => putModule(ctx, kind, m.name, req.params.id, req.body, req.params) });
    add({ method: 'GET', path: at, summary: `Get the ${m.name} module of ${aK}`, status: 200, response: m.read, handle: (ctx, req) => getModule(ctx, kind, m.name, req.params.id, parentOf(kind, req.params)) });
    add({ method: 'DELETE', path: at, summary: `Remove the ${m.name} module of ${aK}`, status: 204, handle: async (ctx, req) => { await deleteModule(ctx, kind, m.name, req.params.id, parentOf(kind, req.params)); } });
  }
  return routes;
}

const extra: ApiRoute[] = [];

/** Families add routes the catalog's operations do not cover (agent commands, event logs). */
export function extraRoute(route: Omit<ApiRoute, 'handle' | 'query'> & { query?: readonly string[]; handle: ApiRoute['handle'] }) {
  const kind = route.kind;
  extra.push({
    query: [],
    ...route,
    handle: async (ctx, req) => {
      if (kind) checkIds(kind, req.params);
      return route.handle(ctx, req);
    },
  });
}

export function apiRoutes(): ApiRoute[] {
  return [...catalog.flatMap(kindRoutes), ...extra];
}
