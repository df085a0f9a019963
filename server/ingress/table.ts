// The routing table: plain data compiled from the store, held by one LiveTable per server. A
// change makes a new table from the previous one, touching only what changed (TableState), so
// the request path never reads the database and a request keeps the table it started with.
import { httpResponseBackend, tunnelGroupBackend, weightedBackend } from '../../provider/catalog/backends.js';
import { certificateAuthority, tlsCertificate } from '../../provider/catalog/certificates.js';
import { httpsEdge, httpsEdgeRoute, tcpEdge, tlsEdge } from '../../provider/catalog/edges.js';
import { cloudEndpoint } from '../../provider/catalog/endpoints.js';
import { ipPolicy, ipPolicyRule } from '../../provider/catalog/ip-policies.js';
import { mergeSecrets } from '../../provider/catalog/walk.js';
import type { ServerContext } from '../resources/context.js';
import { toStored, type Row } from '../resources/engine.js';
import { compileCloudEndpoints, isCloudEndpointRow } from './cloud-endpoints.js';
import { IpRuleSet, IpRuleSetBuilder, type IpAction } from './ip-rules.js';
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
export const TABLE_KINDS = [...Object.keys(EDGE_KINDS), httpsEdgeRoute.kind, ...BACKEND_KINDS, ipPolicy.kind, ipPolicyRule.kind, tlsCertificate.kind, certificateAuthority.kind, cloudEndpoint.kind];

/** The id prefixes of those kinds: a write of no such id cannot change the table. */
const TABLE_PREFIXES = new Set([httpsEdge, tcpEdge, tlsEdge, httpsEdgeRoute, httpResponseBackend, tunnelGroupBackend, weightedBackend, ipPolicy, ipPolicyRule, tlsCertificate, certificateAuthority, cloudEndpoint].map((k) => k.prefix));
export const isTableId = (id: string) => TABLE_PREFIXES.has(id.slice(0, id.indexOf('_')));

/** The public port of a canonical hostport (`name:port`, `[v6]:port`). */
export const portOf = (hostport: string) => Number(hostport.slice(hostport.lastIndexOf(':') + 1));
/** Its host, lower case, without IPv6 brackets. */
export const hostOf = (hostport: string) => hostport.slice(0, hostport.lastIndexOf(':')).replace(/^\[|\]$/g, '').toLowerCase();

const oldestFirst = (a: SnapshotRow, b: SnapshotRow) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1);

/** What changed in the store: the rows written (as they are now) and the ids no longer there. */
export interface TableChange {
  rows: SnapshotRow[];
  gone: string[];
}

/** One rule of an IP policy, as the batched read gives it (no document, no object kept per rule). */
export interface RuleRow { id: string; policyId: string; cidr: string; action: IpAction }

interface EdgeRecord { row: SnapshotRow; kind: EdgeKind; routes: SnapshotRow[]; entry: EdgeEntry }

const full = (r: SnapshotRow): FullDoc => ({ ...r.doc, id: r.id });

/**
 * The routing table and the indexes that let one change touch only what it changes: an edge's
 * entry and the ports it is on, a route's edge, one backend, certificate or authority, one IP
 * policy's rules. Each change makes a new IngressTable (a new version) that shares every
 * unchanged part with the previous one, which stays as it was for the requests holding it:
 * a request sees the old state or the new one, never a part-made one. The indexes are the
 * LiveTable's alone (it applies changes one at a time).
 */
export class TableState {
  private readonly edges = new Map<string, EdgeRecord>();
  private readonly routeEdge = new Map<string, string>();
  private readonly portEdges = new Map<number, Set<string>>();
  /** Cloud endpoints' rows by id (agents' endpoints, rows of the same kind with a tunnel for parent, are the gateway's). */
  private readonly endpointRows = new Map<string, SnapshotRow>();
  table: IngressTable;

  private constructor(version: number) {
    this.table = { version, ports: new Map(), certificates: [], backends: new Map(), ipPolicies: new Map(), certificateAuthorities: new Map() };
  }

  /** The state for one snapshot of the store (rules may come with it or later, by addRules). Pure. */
  static build(rows: SnapshotRow[], version: number): TableState {
    const st = new TableState(version);
    const t = st.table;
    const routes = new Map<string, SnapshotRow[]>();
    for (const r of rows.filter((x) => x.kind === httpsEdgeRoute.kind).sort(oldestFirst)) {
      const list = routes.get(r.parentId!);
      if (list) list.push(r);
      else routes.set(r.parentId!, [r]);
      st.routeEdge.set(r.id, r.parentId!);
    }
    for (const r of rows) {
      if (EDGE_KINDS[r.kind]) st.edges.set(r.id, st.record(r, routes.get(r.id) ?? []));
      else if (BACKEND_KINDS.has(r.kind)) t.backends.set(r.id, { ...full(r), kind: r.kind });
      else if (r.kind === certificateAuthority.kind) t.certificateAuthorities.set(r.id, r.doc.ca_pem as string);
      else if (r.kind === tlsCertificate.kind) t.certificates.push(certificateOf(r));
      else if (r.kind === ipPolicy.kind) t.ipPolicies.set(r.id, IpRuleSet.EMPTY);
      else if (isCloudEndpointRow(r)) st.endpointRows.set(r.id, r);
    }
    t.cloudEndpoints = compileCloudEndpoints(st.endpointRows.values());
    for (const e of st.edges.values()) for (const p of portsOf(e.row)) st.portSet(p).add(e.row.id);
    for (const p of st.portEdges.keys()) st.placePort(t.ports, p);
    const rules = rows.filter((x) => x.kind === ipPolicyRule.kind).map((r) => ({ id: r.id, policyId: r.doc.ip_policy_id ?? r.parentId, cidr: r.doc.cidr, action: r.doc.action }));
    st.addRules(rules);
    return st;
  }

  /** Rules given with the snapshot (tests; a server reads them by loadRules), added to the policies they name. */
  private addRules(rules: RuleRow[]) {
    const by = new Map<string, IpRuleSetBuilder>();
    for (const r of rules) {
      if (!this.table.ipPolicies.has(r.policyId)) continue;
      let b = by.get(r.policyId);
      if (!b) by.set(r.policyId, (b = new IpRuleSetBuilder()));
      b.add(r);
    }
    for (const [id, b] of by) this.table.ipPolicies.set(id, b.build());
  }

  hasPolicy(id: string): boolean {
    return this.table.ipPolicies.has(id);
  }

  /** Sets one policy's rules whole while the state is being built (start, a full reload), before any request sees it. */
  setRules(policyId: string, set: IpRuleSet) {
    if (this.table.ipPolicies.has(policyId)) this.table.ipPolicies.set(policyId, set);
  }

  /** A new table with one policy's rules replaced whole (after a rule's id could not be told apart from another's). */
  replaceRules(policyId: string, set: IpRuleSet, version: number): IngressTable {
    if (!this.table.ipPolicies.has(policyId)) return this.table;
    this.table = { ...this.table, version, ipPolicies: new Map(this.table.ipPolicies).set(policyId, set) };
    return this.table;
  }

  /**
   * A new table with `change` applied; unchanged parts are shared. Returns the policies whose
   * rules could not be changed in place (a hash shared by two rule ids: read them again).
   */
  apply(change: TableChange, version: number): { table: IngressTable; rereadPolicies: string[] } {
    const t = this.table;
    let ports: IngressTable['ports'] | undefined;
    let backends: IngressTable['backends'] | undefined;
    let cas: IngressTable['certificateAuthorities'] | undefined;
    let certificates: IngressTable['certificates'] | undefined;
    let policies: IngressTable['ipPolicies'] | undefined;
    const reread = new Set<string>();
    let endpointsTouched = false;
    const touchedPorts = new Set<number>();
    const touchedEdges = new Set<string>();
    const edgeGone = (id: string) => {
      const rec = this.edges.get(id);
      if (!rec) return;
      for (const p of portsOf(rec.row)) { this.portEdges.get(p)?.delete(id); touchedPorts.add(p); }
      for (const r of rec.routes) this.routeEdge.delete(r.id);
      this.edges.delete(id);
    };
    const removeRule = (id: string, policyId?: string) => {
      policies ??= new Map(t.ipPolicies);
      for (const [pid, set] of policies) {
        if (policyId && pid !== policyId) continue;
        const next = set.without(id);
        if (!next) { reread.add(pid); continue; }
        if (next !== set) { policies.set(pid, next); if (!policyId) return; }
      }
    };
    for (const id of change.gone) {
      if (this.endpointRows.delete(id)) endpointsTouched = true;
      else if (this.edges.has(id)) edgeGone(id);
      else if (this.routeEdge.has(id)) {
        const edgeId = this.routeEdge.get(id)!;
        this.routeEdge.delete(id);
        const rec = this.edges.get(edgeId);
        if (rec) { rec.routes = rec.routes.filter((r) => r.id !== id); touchedEdges.add(edgeId); }
      } else if (t.backends.has(id)) (backends ??= new Map(t.backends)).delete(id);
      else if (t.certificateAuthorities.has(id)) (cas ??= new Map(t.certificateAuthorities)).delete(id);
      else if (t.ipPolicies.has(id)) (policies ??= new Map(t.ipPolicies)).delete(id);
      else if (t.certificates.some((c) => c.id === id)) certificates = (certificates ?? t.certificates).filter((c) => c.id !== id);
      else if (id.startsWith(`${ipPolicyRule.prefix}_`)) removeRule(id);
    }
    for (const r of change.rows) {
      if (isCloudEndpointRow(r)) {
        this.endpointRows.set(r.id, r);
        endpointsTouched = true;
      } else if (EDGE_KINDS[r.kind]) {
        const old = this.edges.get(r.id);
        // The same hostports (a route added, a module set): the new entry takes the old one's
        // places, and the ports are not placed again (a port may hold 10,000 edges).
        if (old && sameHostports(old.row, r)) {
          old.row = r;
          touchedEdges.add(r.id);
          continue;
        }
        if (old) for (const p of portsOf(old.row)) { this.portEdges.get(p)?.delete(r.id); touchedPorts.add(p); }
        this.edges.set(r.id, this.record(r, old?.routes ?? []));
        for (const p of portsOf(r)) { this.portSet(p).add(r.id); touchedPorts.add(p); }
      } else if (r.kind === httpsEdgeRoute.kind) {
        const edgeId = r.parentId!;
        this.routeEdge.set(r.id, edgeId);
        const rec = this.edges.get(edgeId);
        if (rec) { rec.routes = [...rec.routes.filter((x) => x.id !== r.id), r].sort(oldestFirst); touchedEdges.add(edgeId); }
      } else if (BACKEND_KINDS.has(r.kind)) (backends ??= new Map(t.backends)).set(r.id, { ...full(r), kind: r.kind });
      else if (r.kind === certificateAuthority.kind) (cas ??= new Map(t.certificateAuthorities)).set(r.id, r.doc.ca_pem as string);
      else if (r.kind === tlsCertificate.kind) certificates = [...(certificates ?? t.certificates).filter((c) => c.id !== r.id), certificateOf(r)];
      else if (r.kind === ipPolicy.kind) {
        if (!t.ipPolicies.has(r.id) || policies?.has(r.id) === false) (policies ??= new Map(t.ipPolicies)).set(r.id, IpRuleSet.EMPTY);
      } else if (r.kind === ipPolicyRule.kind) {
        const policyId = (r.doc.ip_policy_id ?? r.parentId) as string;
        removeRule(r.id, policyId);
        const set = policies!.get(policyId);
        if (set && !reread.has(policyId)) policies!.set(policyId, set.with({ id: r.id, cidr: r.doc.cidr, action: r.doc.action }));
      }
    }
    // An edge whose routes changed gets a new entry, in place of the old one wherever it is held.
    for (const id of touchedEdges) {
      const rec = this.edges.get(id);
      if (!rec) continue;
      const old = rec.entry;
      rec.entry = this.record(rec.row, rec.routes).entry;
      for (const hp of (rec.row.doc.hostports ?? []) as string[]) {
        const p = portOf(hp);
        if (touchedPorts.has(p)) continue;
        const held = (ports ?? t.ports).get(p);
        if (!held || held.hosts.get(hostOf(hp)) !== old) continue;
        // One copy of the port's hosts per change, then set in place (the copy is this version's alone).
        const fresh = ports?.get(p) !== t.ports.get(p) && ports?.has(p) ? held.hosts : new Map(held.hosts);
        fresh.set(hostOf(hp), rec.entry);
        (ports ??= new Map(t.ports)).set(p, { kind: held.kind, hosts: fresh });
      }
    }
    if (touchedPorts.size) {
      ports ??= new Map(t.ports);
      for (const p of touchedPorts) this.placePort(ports, p);
    }
    this.table = {
      version,
      ports: ports ?? t.ports,
      certificates: certificates ?? t.certificates,
      backends: backends ?? t.backends,
      ipPolicies: policies ?? t.ipPolicies,
      certificateAuthorities: cas ?? t.certificateAuthorities,
      cloudEndpoints: endpointsTouched ? compileCloudEndpoints(this.endpointRows.values()) : t.cloudEndpoints,
    };
    return { table: this.table, rereadPolicies: [...reread] };
  }

  private portSet(p: number): Set<string> {
    let set = this.portEdges.get(p);
    if (!set) this.portEdges.set(p, (set = new Set()));
    return set;
  }

  private record(r: SnapshotRow, routes: SnapshotRow[]): EdgeRecord {
    const kind = EDGE_KINDS[r.kind];
    const entry = { kind, doc: kind === 'https' ? { ...full(r), routes: routes.map((x) => ({ ...full(x), edge_id: r.id })) } : full(r) } as EdgeEntry;
    return { row: r, kind, routes, entry };
  }

  /**
   * What one public port serves, from the edges on it. A port carries HTTPS and TLS edges by
   * name, or one TCP edge (the API refuses others, ERR_SERVICE_700); should older data mix a
   * TCP edge with others, the kind of the port's oldest edge wins and the others are left out,
   * as is a second TCP edge on one port; a host named by two edges is the oldest one's. A
   * port's kind is `https` when it has any HTTPS edge.
   */
  private placePort(ports: IngressTable['ports'], port: number) {
    const ids = this.portEdges.get(port);
    const recs = [...(ids ?? [])].map((id) => this.edges.get(id)!).filter(Boolean).sort((a, b) => oldestFirst(a.row, b.row));
    let held: { kind: EdgeKind; hosts: Map<string, EdgeEntry> } | undefined;
    for (const rec of recs) {
      for (const hp of (rec.row.doc.hostports ?? []) as string[]) {
        if (portOf(hp) !== port) continue;
        held ??= { kind: rec.kind, hosts: new Map() };
        // HTTPS and TLS edges share a port by name; a TCP edge takes its port whole.
        if ((held.kind !== rec.kind && (held.kind === 'tcp' || rec.kind === 'tcp')) || (rec.kind === 'tcp' && held.hosts.size && ![...held.hosts.values()].includes(rec.entry))) continue;
        // A port with any HTTPS edge answers unknown names as HTTPS does (a handshake, then 404).
        if (rec.kind === 'https') held.kind = 'https';
        if (!held.hosts.has(hostOf(hp))) held.hosts.set(hostOf(hp), rec.entry);
      }
    }
    if (held) ports.set(port, held);
    else { ports.delete(port); this.portEdges.delete(port); }
  }
}

const sameHostports = (a: SnapshotRow, b: SnapshotRow) => JSON.stringify(a.doc.hostports ?? []) === JSON.stringify(b.doc.hostports ?? []);

const portsOf = (r: SnapshotRow) => new Set(((r.doc.hostports ?? []) as string[]).map(portOf));

function certificateOf(r: SnapshotRow): CertificateEntry {
  return {
    id: r.id,
    dnsNames: ((r.computed.subject_alternative_names?.dns_names ?? []) as string[]).map((n) => n.toLowerCase()),
    ips: (r.computed.subject_alternative_names?.ips ?? []) as string[],
    notBefore: new Date(r.computed.not_before),
    notAfter: new Date(r.computed.not_after),
    createdAt: r.createdAt,
    issuedAt: r.computed.issued_at ? new Date(r.computed.issued_at) : null,
    certificatePem: r.doc.certificate_pem,
    privateKeyPem: r.doc.private_key_pem,
  };
}

/** The table for one snapshot of the store. Pure (TableState.build's table). */
export function compileTable(rows: SnapshotRow[], version: number): IngressTable {
  return TableState.build(rows, version).table;
}

/** Kinds read as documents; IP policy rules, which may be a million, are read by loadRules. */
const DOC_KINDS = TABLE_KINDS.filter((k) => k !== ipPolicyRule.kind);

/**
 * Reads what the table is compiled from (committed rows only): every table kind but IP policy
 * rules, or with `ids` those rows of any table kind (the rows a write touched).
 */
export async function loadSnapshot(ctx: ServerContext, ids?: string[]): Promise<SnapshotRow[]> {
  const rows = await ctx.db.read.resource.findMany({ where: ids ? { id: { in: ids }, kind: { in: TABLE_KINDS } } : { kind: { in: DOC_KINDS } } });
  return rows.map((row) => {
    const stored = toStored(ctx, row as Row);
    const doc = mergeSecrets(stored.body, stored.secretFields);
    // A SAML route signs its requests with the key the server keeps sealed for it (resources/edges.ts).
    if (stored.kind === httpsEdgeRoute.kind && doc.saml && stored.internal.saml) doc.saml = { ...doc.saml, request_signing: stored.internal.saml };
    return { id: stored.id, kind: stored.kind, parentId: stored.parentId, createdAt: stored.createdAt, doc, computed: stored.computed };
  });
}

/** Rules read per statement at start (one text of about 4 MB). */
export const RULE_BATCH = 50_000;

/**
 * Every IP policy rule (or one policy's), in batches of `batch` in id order (the (kind, id)
 * index): each batch is one text the database makes (HotReads.ipRuleLines: the CIDR and the
 * action taken out of each document there), read in place into the builder `builderFor` gives
 * for the rule's policy (none: the rule is skipped), with no object or string per rule. Not
 * through Prisma, whose row objects cost 20 of the 23 s a million rules took. The event loop
 * turns between batches (a whole reload runs while requests are served). Returns how many
 * rules were read.
 */
export async function loadRules(ctx: ServerContext, builderFor: (policyId: string) => IpRuleSetBuilder | undefined, policyId?: string, batch = RULE_BATCH): Promise<number> {
  let after = '';
  let total = 0;
  for (;;) {
    const lines = await ctx.db.hot.ipRuleLines(after, batch, policyId);
    if (!lines.n) return total;
    total += lines.n;
    addRuleLines(lines.text, builderFor);
    if (lines.n < batch) return total;
    after = lines.last;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Each line of `text` (`id TAB policy TAB cidr TAB action`) into its policy's builder. */
export function addRuleLines(text: string, builderFor: (policyId: string) => IpRuleSetBuilder | undefined) {
  // Rules come grouped by policy more often than not: the last policy's builder is kept.
  let policy = '';
  let builder: IpRuleSetBuilder | undefined;
  for (let p = 0; p < text.length;) {
    const t1 = text.indexOf('\t', p);
    const t2 = text.indexOf('\t', t1 + 1);
    const t3 = text.indexOf('\t', t2 + 1);
    let end = text.indexOf('\n', t3 + 1);
    if (end < 0) end = text.length;
    if (t1 < 0 || t2 < 0 || t3 < 0 || t3 > end) throw new Error(`malformed IP rule line from the database: ${JSON.stringify(text.slice(p, Math.min(end, p + 200)))}`);
    if (t2 - t1 - 1 !== policy.length || !text.startsWith(policy, t1 + 1)) {
      policy = text.slice(t1 + 1, t2);
      builder = builderFor(policy);
    }
    if (builder) builder.addText(text, p, t1, t2 + 1, t3, end - t3 - 1 === 4 && text.startsWith('deny', t3 + 1));
    p = end + 1;
  }
}
