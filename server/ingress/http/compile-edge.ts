// What the HTTP side keeps per edge entry: the route matchers and each route's filter chain,
// built on the first request (HttpsEdgeEntry.compiled). A change to the edge or its routes
// makes a new entry (table.ts); the entries of other edges, and what is compiled for them,
// carry over to the next table version.
import type { EdgeAnswer, HttpFilter, HttpsEdgeEntry, IngressDeps, IngressTable } from '../types.js';
import { buildChain } from './chain.js';
import { routeMatcher, type RouteMatcher } from './select-route.js';

export interface CompiledEdge {
  version: number;
  matchers: RouteMatcher[];
  chains: Map<string, HttpFilter[] | EdgeAnswer>;
}

export function compiledEdge(entry: HttpsEdgeEntry, table: IngressTable, deps: IngressDeps): CompiledEdge {
  const have = entry.compiled as CompiledEdge | undefined;
  if (have) return have;
  const routes = (entry.doc.routes ?? []) as HttpsEdgeEntry['doc'][];
  const compiled: CompiledEdge = { version: table.version, matchers: routes.map(routeMatcher), chains: new Map() };
  entry.compiled = compiled;
  return compiled;
}

export function chainOf(compiled: CompiledEdge, route: HttpsEdgeEntry['doc'], deps: IngressDeps): HttpFilter[] | EdgeAnswer {
  let chain = compiled.chains.get(route.id);
  if (!chain) {
    chain = buildChain(route, deps);
    compiled.chains.set(route.id, chain);
  }
  return chain;
}
