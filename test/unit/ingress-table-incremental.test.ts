// The routing table applied by change (server/ingress/table.ts TableState.apply) and the
// compact IP rule sets (server/ingress/ip-rules.ts): a change to one edge makes a new entry for
// that edge only, the previous table stays whole for the requests holding it, and any sequence
// of changes gives the table a whole compile of the final rows gives; the rule sets answer as
// a plain scan of the rules does, across additions and removals past a rebuild.
import { describe, expect, it } from 'vitest';
import { addressKey, IpRuleSet, OVERLAY_MAX, type IpAction } from '../../server/ingress/ip-rules.js';
import { compileTable, TableState, type SnapshotRow } from '../../server/ingress/table.js';
import type { IngressTable } from '../../server/ingress/types.js';

const at = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, n));
const row = (id: string, kind: string, n: number, doc: Record<string, any>, parentId: string | null = null): SnapshotRow => ({ id, kind, parentId, createdAt: at(n), doc, computed: {} });
const edge = (i: number, hosts = [`e${i}.example.com:443`]) => row(`edghts_${i}`, 'HTTPSEdge', i, { hostports: hosts });
const route = (i: number, edgeId: string, match: string) => row(`edghtsrt_${i}`, 'HTTPSEdgeRoute', 1000 + i, { match_type: 'path_prefix', match }, edgeId);
const entryOf = (t: IngressTable, host: string, port = 443) => t.ports.get(port)?.hosts.get(host);

describe('TableState.apply', () => {
  const base = () => [edge(1), edge(2), edge(3), route(1, 'edghts_1', '/'), route(2, 'edghts_2', '/'), row('bkdhr_1', 'HTTPResponseBackend', 1, { body: 'a' })];

  it('a change to one edge\'s route makes a new entry for that edge only; the other entries are the same objects', () => {
    const st = TableState.build(base(), 1);
    const before = st.table;
    const { table } = st.apply({ rows: [route(1, 'edghts_1', '/v2')], gone: [] }, 2);
    expect(table.version).toBe(2);
    expect(entryOf(table, 'e1.example.com')).not.toBe(entryOf(before, 'e1.example.com'));
    expect((entryOf(table, 'e1.example.com')!.doc.routes as any[]).map((r) => r.match)).toEqual(['/v2']);
    expect(entryOf(table, 'e2.example.com')).toBe(entryOf(before, 'e2.example.com'));
    expect(entryOf(table, 'e3.example.com')).toBe(entryOf(before, 'e3.example.com'));
    expect(table.backends).toBe(before.backends);
    expect(table.ipPolicies).toBe(before.ipPolicies);
  });

  it('the previous table is left whole: a request holding it still finds every edge, with its old routes', () => {
    const st = TableState.build(base(), 1);
    const held = st.table;
    st.apply({ rows: [edge(1, ['moved.example.com:443']), route(2, 'edghts_2', '/new')], gone: ['edghts_3'] }, 2);
    for (const i of [1, 2, 3]) expect(entryOf(held, `e${i}.example.com`)?.doc.id).toBe(`edghts_${i}`);
    expect((entryOf(held, 'e2.example.com')!.doc.routes as any[]).map((r) => r.match)).toEqual(['/']);
    const now = st.table;
    expect(entryOf(now, 'e1.example.com')).toBeUndefined();
    expect(entryOf(now, 'moved.example.com')?.doc.id).toBe('edghts_1');
    expect(entryOf(now, 'e3.example.com')).toBeUndefined();
    expect(entryOf(now, 'e2.example.com')?.doc.routes.map((r: any) => r.match)).toEqual(['/new']);
  });

  it('gives what a whole compile of the final rows gives, over a long run of random changes', () => {
    let seed = 7;
    const rand = (n: number) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return Math.floor(seed / 65536) % n; };
    const rows = new Map<string, SnapshotRow>();
    for (const r of base()) rows.set(r.id, r);
    rows.set('ipp_1', row('ipp_1', 'IPPolicy', 1, {}));
    const st = TableState.build([...rows.values()], 1);
    let n = 10;
    for (let step = 0; step < 400; step++) {
      const change: { rows: SnapshotRow[]; gone: string[] } = { rows: [], gone: [] };
      const op = rand(9);
      const edges = [...rows.values()].filter((r) => r.kind.endsWith('Edge'));
      const pick = <T,>(list: T[]) => list[rand(list.length)];
      n += 1;
      if (op === 0 || !edges.length) {
        // A new edge, sometimes on a host another edge has (the older one keeps it), sometimes TCP.
        const r = rand(4) === 0 ? row(`edgtcp_${n}`, 'TCPEdge', n, { hostports: [`${rand(3)}.tcp.example.com:2000${rand(2)}`] }) : edge(n, [`e${rand(n)}.example.com:${pick([443, 8443])}`]);
        rows.set(r.id, r); change.rows.push(r);
      } else if (op === 1) {
        const e = pick(edges);
        const r = { ...e, doc: { ...e.doc, hostports: e.kind === 'TCPEdge' ? e.doc.hostports : [`e${rand(n)}.example.com:${pick([443, 8443])}`, `x${rand(5)}.example.com:443`] } };
        rows.set(r.id, r); change.rows.push(r);
      } else if (op === 2) {
        const e = pick(edges);
        rows.delete(e.id);
        for (const [id, r] of rows) if (r.parentId === e.id) rows.delete(id);
        change.gone.push(e.id);
      } else if (op === 3 || op === 4) {
        const e = pick(edges.filter((x) => x.kind === 'HTTPSEdge'));
        if (!e) continue;
        const r = route(n, e.id, `/${rand(20)}`);
        rows.set(r.id, r); change.rows.push(r);
      } else if (op === 5) {
        const routes = [...rows.values()].filter((r) => r.kind === 'HTTPSEdgeRoute');
        if (!routes.length) continue;
        const r = pick(routes);
        rows.delete(r.id); change.gone.push(r.id);
      } else if (op === 6) {
        const r = row(`bkdhr_${rand(5)}`, 'HTTPResponseBackend', n, { body: `b${n}` });
        rows.set(r.id, r); change.rows.push(r);
      } else if (op === 7) {
        const r = row(`ipr_${n}`, 'IPPolicyRule', n, { ip_policy_id: 'ipp_1', cidr: `10.${rand(4)}.${rand(4)}.0/24`, action: pick(['allow', 'deny']) }, 'ipp_1');
        rows.set(r.id, r); change.rows.push(r);
      } else {
        const rules = [...rows.values()].filter((r) => r.kind === 'IPPolicyRule');
        if (!rules.length) continue;
        const r = pick(rules);
        rows.delete(r.id); change.gone.push(r.id);
      }
      st.apply(change, step + 2);
      const want = compileTable([...rows.values()], step + 2);
      expect(shape(st.table)).toEqual(shape(want));
      for (const ip of ['10.0.0.1', '10.1.2.3', '10.3.3.3', '10.9.0.1']) {
        for (const action of ['allow', 'deny'] as const) expect(st.table.ipPolicies.get('ipp_1')!.holds(addressKey(ip)!, action)).toBe(want.ipPolicies.get('ipp_1')!.holds(addressKey(ip)!, action));
      }
    }
  });
});

/** A table's routing as plain data (ports, hosts, the edge each serves with its routes; backends). */
function shape(t: IngressTable) {
  const ports = [...t.ports].sort(([a], [b]) => a - b).map(([p, held]) => [p, held.kind, [...held.hosts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([h, e]) => [h, e.doc.id, ((e.doc.routes ?? []) as any[]).map((r) => `${r.id}:${r.match}`)])]);
  return { ports, backends: [...t.backends].sort(([a], [b]) => (a < b ? -1 : 1)), policies: [...t.ipPolicies.keys()].sort() };
}

describe('IpRuleSet', () => {
  /** The plain answer: any rule of this action whose range holds the address. */
  const naive = (rules: { cidr: string; action: IpAction }[], ip: string, action: IpAction) => rules.some((r) => r.action === action && inCidr(ip, r.cidr));

  it('answers as a scan of its rules does, through additions and removals past a rebuild', () => {
    let seed = 11;
    const rand = (n: number) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return Math.floor(seed / 65536) % n; };
    const cidr = () => { const len = 14 + rand(19); return `${10 + rand(2)}.${rand(4)}.${rand(256)}.${rand(256)}/${len}`; };
    let rules = Array.from({ length: 500 }, (_v, i) => ({ id: `ipr_${i}`, cidr: normal(cidr()), action: (rand(3) ? 'deny' : 'allow') as IpAction }));
    rules = rules.filter((r, i) => rules.findIndex((x) => x.cidr === r.cidr) === i);
    let set = IpRuleSet.of(rules);
    // Addresses inside rules (first, last and one between), and anywhere.
    const inside = (c: string) => { const [ip, len] = c.split('/'); const size = 2 ** (32 - Number(len)); const n = v4(ip) + pick3(size); return [24, 16, 8, 0].map((b) => Math.floor(n / 2 ** b) % 256).join('.'); };
    const pick3 = (size: number) => [0, size - 1, rand(size)][rand(3)];
    const probes = () => [...rules.slice(0, 150).map((r) => inside(r.cidr)), ...Array.from({ length: 50 }, () => `${10 + rand(2)}.${rand(4)}.${rand(256)}.${rand(256)}`)];
    let removed: string[] = [];
    const check = () => {
      for (const ip of [...probes(), ...removed.map(inside)]) for (const action of ['allow', 'deny'] as const) expect(set.holds(addressKey(ip)!, action)).toBe(naive(rules, ip, action));
      removed = [];

      expect(set.size).toBe(rules.length);
      expect(set.hasAllow).toBe(rules.some((r) => r.action === 'allow'));
    };
    check();
    for (let i = 0; i < OVERLAY_MAX * 2 + 100; i++) {
      if (rand(2) && rules.length) {
        const r = rules[rand(rules.length)];
        const next = set.without(r.id);
        expect(next).toBeDefined();
        set = next!;
        rules = rules.filter((x) => x !== r);
        removed.push(r.cidr);
      } else {
        const r = { id: `ipr_n${i}`, cidr: normal(cidr()), action: (rand(2) ? 'deny' : 'allow') as IpAction };
        if (rules.some((x) => x.cidr === r.cidr)) continue;
        set = set.with(r);
        rules.push(r);
      }
      if (i % 37 === 0) check();
    }
    check();
  });

  it('IPv6, and an IPv4-mapped IPv6 rule covering the IPv4 addresses it maps', () => {
    const set = IpRuleSet.of([
      { id: 'ipr_a', cidr: '2001:db8::/32', action: 'allow' },
      { id: 'ipr_b', cidr: '2001:db8:bad::/48', action: 'deny' },
      { id: 'ipr_c', cidr: '::ffff:198.51.100.0/120', action: 'allow' },
    ]);
    expect(set.holds(addressKey('2001:db8:1::1')!, 'allow')).toBe(true);
    expect(set.holds(addressKey('2001:db8:bad::1')!, 'deny')).toBe(true);
    expect(set.holds(addressKey('2001:db9::1')!, 'allow')).toBe(false);
    expect(set.holds(addressKey('198.51.100.7')!, 'allow')).toBe(true);
    expect(set.holds(addressKey('::ffff:198.51.100.7')!, 'allow')).toBe(true);
    expect(set.holds(addressKey('198.51.101.7')!, 'allow')).toBe(false);
    expect(set.without('ipr_b')!.holds(addressKey('2001:db8:bad::1')!, 'deny')).toBe(false);
  });

  it('a removal leaves the set it was made from as it was (a request holding the old table sees the old rules)', () => {
    const set = IpRuleSet.of([{ id: 'ipr_1', cidr: '10.0.0.0/8', action: 'deny' }]);
    const after = set.without('ipr_1')!;
    expect(set.holds(addressKey('10.1.1.1')!, 'deny')).toBe(true);
    expect(after.holds(addressKey('10.1.1.1')!, 'deny')).toBe(false);
    expect(set.without('ipr_unknown')).toBe(set);
  });
});

function v4(ip: string): number {
  return ip.split('.').reduce((n, p) => n * 256 + Number(p), 0);
}

/** The CIDR with its host bits cleared (as the API stores it). */
function normal(cidr: string): string {
  const [ip, len] = cidr.split('/');
  const size = 2 ** (32 - Number(len));
  const start = v4(ip) - (v4(ip) % size);
  return `${[24, 16, 8, 0].map((s) => Math.floor(start / 2 ** s) % 256).join('.')}/${len}`;
}

function inCidr(ip: string, cidr: string): boolean {
  const [net, len] = cidr.split('/');
  const size = 2 ** (32 - Number(len));
  return Math.floor(v4(ip) / size) === Math.floor(v4(net) / size);
}
