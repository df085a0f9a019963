// Agents' own endpoints (issue 30): the hostname an agent's ephemeral tunnel was given (a
// generated name under --endpoint-domain, or the one it asked for) is served by that tunnel on
// every ingress port where no edge claims the name. Consulted only when no edge matches, so
// edges always win; the lookup is the gateway's map of the endpoints held on this instance.
import type { Duplex } from 'node:stream';
import { holdRelay } from './backends/serve.js';
import { relayHttp, relayTcp } from './backends/relay.js';
import type { HttpExchange } from './http/exchange.js';
import type { IngressDeps } from './types.js';

/** The tunnel serving this hostname (lower case), when an agent's endpoint has it. */
export function endpointTunnelFor(deps: IngressDeps, host: string): string | undefined {
  return deps.gateway.endpointTunnel(host);
}

/** Whether a connection without an edge for its server name may still be an endpoint's. */
export const anyEndpoints = (deps: IngressDeps) => deps.gateway.hasEndpoints;

export async function serveEndpoint(ex: HttpExchange, tunnelId: string): Promise<void> {
  holdRelay(ex);
  await relayHttp(ex, tunnelId);
}

export function connectEndpoint(ex: HttpExchange, tunnelId: string): Promise<Duplex> {
  holdRelay(ex);
  return relayTcp(ex, tunnelId);
}
