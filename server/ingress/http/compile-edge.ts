// What the HTTP side keeps per edge and table version: the route matchers and each route's
// filter chain, built on the first request (HttpsEdgeEntry.compiled).
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
  if (have && have.version === table.version) return have;
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
