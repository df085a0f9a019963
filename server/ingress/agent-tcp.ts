// Agents' TCP endpoints (`--agent-tcp-ports FIRST-LAST`): one listener per port of the range, at
// the first --ingress listener's address, public port = local port. A connection goes to the
// online tunnel whose endpoint holds that port (gateway.tcpEndpointTunnel), or is closed; the
// relay limit per client address and the access-log line are a TCP edge's (tcp.ts).
import net from 'node:net';
import { endpointAllows } from './endpoint-ip.js';
import { clientIpOf, spliceThroughTunnel } from './tcp.js';
import type { IngressDeps } from './types.js';

export interface AgentTcpListeners {
  ports: number[];
  drain(deadlineMs: number): Promise<void>;
}

export async function startAgentTcp(host: string, range: { first: number; last: number }, deps: IngressDeps, maxConnections: number): Promise<AgentTcpListeners> {
  const servers: net.Server[] = [];
  const open = new Set<net.Socket>();
  const close = async () => {
    for (const s of servers) s.close();
    for (const c of open) c.destroy();
  };
  try {
    for (let port = range.first; port <= range.last; port++) {
      const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => serve(socket, port, deps, open));
      server.maxConnections = maxConnections;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => { server.off('error', reject); resolve(); });
      });
      servers.push(server);
    }
  } catch (e) {
    await close();
    throw new Error(`--agent-tcp-ports: cannot listen on ${host}:${(e as { port?: number }).port ?? ''}: ${(e as Error).message}`);
  }
  return {
    ports: servers.map((s) => (s.address() as net.AddressInfo).port),
    async drain(deadlineMs) {
      for (const s of servers) s.close();
      const deadline = Date.now() + deadlineMs;
      while (open.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await close();
    },
  };
}

function serve(socket: net.Socket, port: number, deps: IngressDeps, open: Set<net.Socket>) {
  open.add(socket);
  socket.on('error', () => {});
  const started = deps.now();
  const line: Record<string, unknown> = { msg: 'ingress connection', kind: 'agent-tcp', public_port: port, client_ip: clientIpOf(socket) };
  socket.once('close', () => {
    open.delete(socket);
    deps.log({ level: 'info', ...line, bytes_in: socket.bytesRead, bytes_out: socket.bytesWritten, duration_ms: deps.now() - started });
  });
  const tunnelId = deps.gateway.tcpEndpointTunnel(port);
  if (!tunnelId) {
    line.refused = 'no_endpoint';
    return void socket.destroy();
  }
  if (!endpointAllows(deps, tunnelId, line.client_ip as string)) {
    line.refused = 'ip_restriction';
    return void socket.destroy();
  }
  spliceThroughTunnel(socket, tunnelId, deps, line.client_ip as string, line);
}
