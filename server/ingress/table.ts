// The routing table: plain data compiled from the store by a pure function, held by one
// LiveTable per server and swapped whole when something changes, so the request path never
// reads the database and a request keeps the table it started with.
import { httpResponseBackend, tunnelGroupBackend, weightedBackend } from '../../provider/catalog/backends.js';
import { certificateAuthority, tlsCertificate } from '../../provider/catalog/certificates.js';
import { httpsEdge, httpsEdgeRoute, tcpEdge, tlsEdge } from '../../provider/catalog/edges.js';
import { ipPolicy, ipPolicyRule } from '../../provider/catalog/ip-policies.js';
import { mergeSecrets } from '../../provider/catalog/walk.js';
import type { ServerContext } from '../resources/context.js';
import { toStored, type Row } from '../resources/engine.js';
import type { CertificateEntry, EdgeEntry, EdgeKind, FullDoc, IngressTable } from './types.js';

/** One stored resource as the table needs it: its full input document (secrets opened) and computed fields. */
export interface SnapshotRow {
  id: string;
  kind: string;
  parentId: string | null;
  createdAt: Date;
  doc: Record<string, any>;
  computed: Record<string, any>;
}

const EDGE_KINDS: Record<string, EdgeKind> = { [httpsEdge.kind]: 'https', [tcpEdge.kind]: 'tcp', [tlsEdge.kind]: 'tls' };
const BACKEND_KINDS = new Set([httpResponseBackend.kind, tunnelGroupBackend.kind, weightedBackend.kind]);
/** Every kind the table is compiled from. */
export const TABLE_KINDS = [...Object.keys(EDGE_KINDS), httpsEdgeRoute.kind, ...BACKEND_KINDS, ipPolicy.kind, ipPolicyRule.kind, tlsCertificate.kind, certificateAuthority.kind];

/** The public port of a canonical hostport (`name:port`, `[v6]:port`). */
export const portOf = (hostport: string) => Number(hostport.slice(hostport.lastIndexOf(':') + 1));
/** Its host, lower case, without IPv6 brackets. */
export const hostOf = (hostport: string) => hostport.slice(0, hostport.lastIndexOf(':')).replace(/^\[|\]$/g, '').toLowerCase();

const oldestFirst = (a: SnapshotRow, b: SnapshotRow) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1);

/**
 * The table for one snapshot of the store. Pure. A port carries HTTPS and TLS edges by name,
 * or one TCP edge (the API refuses others, ERR_SERVICE_700); should older data mix a TCP edge
 * with others, the kind of the port's oldest edge wins and the others are left out, as is a
 * second TCP edge on one port. A port's kind is `https` when it has any HTTPS edge.
 */
export function compileTable(rows: SnapshotRow[], version: number): IngressTable {
  const full = (r: SnapshotRow): FullDoc => ({ ...r.doc, id: r.id });
  const routes = new Map<string, FullDoc[]>();
  for (const r of rows.filter((x) => x.kind === httpsEdgeRoute.kind).sort(oldestFirst)) {
    const list = routes.get(r.parentId!);
    const route = { ...full(r), edge_id: r.parentId };
    // Appended in place: copying the edge's list for each route was quadratic in its routes.
    if (list) list.push(route);
    else routes.set(r.parentId!, [route]);
  }
  const ports: IngressTable['ports'] = new Map();
  for (const r of rows.filter((x) => EDGE_KINDS[x.kind]).sort(oldestFirst)) {
    const kind = EDGE_KINDS[r.kind];
    const entry = { kind, doc: kind === 'https' ? { ...full(r), routes: routes.get(r.id) ?? [] } : full(r) } as EdgeEntry;
    for (const hp of (r.doc.hostports ?? []) as string[]) {
      const port = portOf(hp);
      const held = ports.get(port) ?? { kind, hosts: new Map<string, EdgeEntry>() };
      // HTTPS and TLS edges share a port by name; a TCP edge takes its port whole.
      if ((held.kind !== kind && (held.kind === 'tcp' || kind === 'tcp')) || (kind === 'tcp' && held.hosts.size && ![...held.hosts.values()].includes(entry))) continue;
      // A port with any HTTPS edge answers unknown names as HTTPS does (a handshake, then 404).
      if (kind === 'https') held.kind = 'https';
      ports.set(port, held);
      if (!held.hosts.has(hostOf(hp))) held.hosts.set(hostOf(hp), entry);
    }
  }
  const certificates: CertificateEntry[] = rows
    .filter((r) => r.kind === tlsCertificate.kind)
    .map((r) => ({
      id: r.id,
      dnsNames: ((r.computed.subject_alternative_names?.dns_names ?? []) as string[]).map((n) => n.toLowerCase()),
      ips: (r.computed.subject_alternative_names?.ips ?? []) as string[],
      notBefore: new Date(r.computed.not_before),
      notAfter: new Date(r.computed.not_after),
      createdAt: r.createdAt,
      issuedAt: r.computed.issued_at ? new Date(r.computed.issued_at) : null,
      certificatePem: r.doc.certificate_pem,
      privateKeyPem: r.doc.private_key_pem,
    }));
  const ipPolicies: IngressTable['ipPolicies'] = new Map(rows.filter((r) => r.kind === ipPolicy.kind).map((r) => [r.id, []]));
  for (const r of rows.filter((x) => x.kind === ipPolicyRule.kind)) ipPolicies.get(r.doc.ip_policy_id)?.push({ cidr: r.doc.cidr, action: r.doc.action });
  return {
    version,
    ports,
    certificates,
    backends: new Map(rows.filter((r) => BACKEND_KINDS.has(r.kind)).map((r) => [r.id, { ...full(r), kind: r.kind }])),
    ipPolicies,
    certificateAuthorities: new Map(rows.filter((r) => r.kind === certificateAuthority.kind).map((r) => [r.id, r.doc.ca_pem as string])),
  };
}

/** Reads what the table is compiled from (committed rows only). */
export async function loadSnapshot(ctx: ServerContext): Promise<SnapshotRow[]> {
  const rows = await ctx.db.read.resource.findMany({ where: { kind: { in: TABLE_KINDS } } });
  return rows.map((row) => {
    const stored = toStored(ctx, row as Row);
    const doc = mergeSecrets(stored.body, stored.secretFields);
    // A SAML route signs its requests with the key the server keeps sealed for it (resources/edges.ts).
    if (stored.kind === httpsEdgeRoute.kind && doc.saml && stored.internal.saml) doc.saml = { ...doc.saml, request_signing: stored.internal.saml };
    return { id: stored.id, kind: stored.kind, parentId: stored.parentId, createdAt: stored.createdAt, doc, computed: stored.computed };
  });
}
