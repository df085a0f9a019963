// Which names want a certificate from the directory: every host an HTTPS edge serves and
// every host of a TLS edge that terminates at the edge, unless an uploaded certificate (one
// the server did not issue) covers it now. Some are left to the local CA, each said once in
// the log: wildcards (they need DNS-01, which needs a DNS provider), IP addresses and names
// no public directory issues for (single labels, localhost).
import { matchStrength } from '../certificates.js';
import type { IngressTable } from '../types.js';

export type Method = 'tls-alpn-01' | 'http-01';

export interface Wanted {
  /** Names to order for, each with how it is validated. */
  names: Map<string, Method>;
  /** Names kept on the local CA, with why. */
  kept: Map<string, string>;
}

const IP = /^[\d.]+$|:/;

export function wantedNames(table: IngressTable, listenerPorts: Set<number>, now = Date.now()): Wanted {
  const names = new Map<string, Method>();
  const kept = new Map<string, string>();
  const method: Method | undefined = listenerPorts.has(443) ? 'tls-alpn-01' : listenerPorts.has(80) ? 'http-01' : undefined;
  const uploaded = table.certificates.filter((c) => !c.issuedAt && c.notBefore.getTime() <= now && c.notAfter.getTime() >= now);
  for (const held of table.ports.values()) {
    for (const [host, edge] of held.hosts) {
      if (edge.kind === 'tcp') continue;
      if (edge.kind === 'tls') {
        // As the listener decides (listen.ts): at the edge unless it says upstream or agent.
        const tt = edge.doc.tls_termination;
        if ((tt?.enabled === false ? 'edge' : (tt?.terminate_at ?? 'edge')) !== 'edge') continue;
      }
      if (names.has(host) || kept.has(host)) continue;
      if (uploaded.some((c) => matchStrength(c, host) > 0)) continue;
      if (host.startsWith('*.')) kept.set(host, 'a wildcard needs the DNS-01 challenge, which this server does not answer');
      else if (IP.test(host)) kept.set(host, 'an IP address');
      else if (!host.includes('.') || host === 'localhost' || host.endsWith('.localhost')) kept.set(host, 'no public directory issues for this name');
      else if (!method) kept.set(host, 'no --ingress listener stands for public port 443 (TLS-ALPN-01) or 80 (HTTP-01)');
      else names.set(host, method);
    }
  }
  return { names, kept };
}
