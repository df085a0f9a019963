// Agents' own endpoints (issue 30): the hostname an agent's ephemeral tunnel was given (a
// generated name under --endpoint-domain, or the one it asked for) is served by that tunnel on
// every ingress port where no edge claims the name. Consulted only when no edge matches, so
// edges always win; the lookup is the gateway's map of the endpoints held on this instance.
import type { Duplex } from 'node:stream';
import { holdRelay } from './backends/serve.js';
import { endpointAllows } from './endpoint-ip.js';
import { relayHttp, relayTcp } from './backends/relay.js';
import { buildChain } from './http/chain.js';
import type { HttpExchange } from './http/exchange.js';
import { spliceThroughTunnel } from './tcp.js';
import type { EdgeAnswer, FullDoc, HttpFilter, IngressDeps } from './types.js';

/** The tunnel serving this hostname (lower case), when an agent's endpoint has it. */
export function endpointTunnelFor(deps: IngressDeps, host: string): string | undefined {
  return deps.gateway.endpointTunnel(host);
}

/**
 * The tunnel that takes this request or connection for the hostname: a pool's members in turn
 * (gateway.pickEndpointTunnel); an ingress worker's gateway (server/cluster/worker.ts) has no
 * pools and gives its one tunnel.
 */
export function pickEndpointTunnel(deps: IngressDeps, host: string): string | undefined {
  const g = deps.gateway as Partial<Pick<IngressDeps['gateway'], 'pickEndpointTunnel'>>;
  return g.pickEndpointTunnel ? g.pickEndpointTunnel(host) : deps.gateway.endpointTunnel(host);
}

/** The modules an endpoint's agent asked for (gateway/v2/bind.ts), built once per route document and ingress. */
const chains = new WeakMap<FullDoc, readonly HttpFilter[] | EdgeAnswer>();
export function endpointChain(deps: IngressDeps, tunnelId: string): { route?: FullDoc; chain: readonly HttpFilter[] | EdgeAnswer } {
  const route = deps.gateway.endpointRoute(tunnelId);
  if (!route) return { chain: [] };
  let chain = chains.get(route);
  if (!chain) chains.set(route, (chain = buildChain(route, deps)));
  return { route, chain };
}


/**
 * A tls endpoint's connection: the client's TLS (ClientHello included, still unread by the
 * socket's consumer) passes through to the agent untouched, as a TLS edge that terminates at
 * the upstream does. The relay limit per client address is a TCP edge's.
 */
export function passThroughTls(socket: Duplex & { remoteAddress?: string }, tunnelId: string, deps: IngressDeps, clientIp: string): void {
  // The endpoint's IP restriction (the SDK's allowCidr/denyCidr), as a TLS edge's.
  if (!endpointAllows(deps, tunnelId, clientIp)) return void socket.destroy();
  spliceThroughTunnel(socket, tunnelId, deps, clientIp);
}

export async function serveEndpoint(ex: HttpExchange, tunnelId: string): Promise<void> {
  holdRelay(ex);
  await relayHttp(ex, tunnelId);
}

export function connectEndpoint(ex: HttpExchange, tunnelId: string): Promise<Duplex> {
  holdRelay(ex);
  return relayTcp(ex, tunnelId);
}
