// How the ingress reads IP policy rules at start (issue 27 item 8: a million rules read in
// under 5 s): never through Prisma (its row objects were most of the 31 s a million took),
// but in batches of text the database itself puts together (HotReads.ipRuleLines), one
// statement per batch, read in place. On both databases, against real ones: the rules read
// this way guard exactly as the rules the API stored, over several batches.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildState, LiveTable } from '../../server/ingress/live-table.js';
import { addressKey, IpRuleSet, IpRuleSetBuilder, type IpAction } from '../../server/ingress/ip-rules.js';
import { addRuleLines, loadRules } from '../../server/ingress/table.js';
import type { ServerContext } from '../../server/resources/context.js';
import type { Database } from '../../server/store/db.js';
import { ruleLinesSql } from '../../server/store/hot-sqlite.js';
import { DATABASES, serverOn } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';

interface Rule { id: string; policy: string; cidr: string; action: IpAction }

/** The database with every Prisma call recorded (client, model and method, and its arguments) and every batch of rules read counted. */
function watched(db: Database) {
  const prismaCalls: string[] = [];
  const batches: number[] = [];
  const record = (name: string, target: object): any => new Proxy(target, {
    get(t, key, receiver) {
      const v = Reflect.get(t, key, receiver);
      if (typeof key !== 'string' || key === 'then') return v;
      if (typeof v === 'function') return (...args: unknown[]) => { prismaCalls.push(`${name}.${key} ${JSON.stringify(args)}`); return v.apply(t, args); };
      if (v && typeof v === 'object' && !key.startsWith('_')) return record(`${name}.${key}`, v);
      return v;
    },
  });
  const hot = {
    ...db.hot,
    ipRuleLines: async (afterId: string, limit: number, policyId?: string) => {
      const lines = await db.hot.ipRuleLines(afterId, limit, policyId);
      batches.push(lines.n);
      return lines;
    },
  };
  const wrapped: Database = { ...db, read: record('read', db.read), prisma: record('prisma', db.prisma), hot };
  return { db: wrapped, prismaCalls, batches };
}

describe.each(DATABASES)('IP rules read at start on $db', ({ db, skip }) => {
  let s: TestServer;
  let close: () => Promise<void>;
  let databaseUrl: string;
  const rules: Rule[] = [];
  const policies: string[] = [];

  beforeAll(async () => {
    if (skip) return;
    ({ s, close, databaseUrl } = await serverOn(db, 'rules_start'));
    for (let p = 0; p < 3; p++) policies.push((await s.post('/ip_policies', {})).body.id);
    const cidrs: [string, IpAction][] = [
      ['10.0.0.0/8', 'deny'], ['10.1.0.0/16', 'allow'], ['10.1.2.3/32', 'deny'], ['192.0.2.0/24', 'allow'], ['198.51.100.7', 'deny'],
      ['0.0.0.0/0', 'deny'], ['203.0.113.128/25', 'allow'], ['2001:db8::/32', 'deny'], ['2001:db8:bad::/48', 'allow'], ['::ffff:198.51.100.0/120', 'allow'],
    ];
    for (const [i, policy] of policies.entries()) {
      for (const [k, [cidr, action]] of cidrs.entries()) {
        if ((k + i) % 3 === 0 && i > 0) continue;
        // A description that looks like a field must not be read as one.
        const r = await s.post('/ip_policy_rules', { ip_policy_id: policy, cidr, action, description: `"cidr":"1.2.3.4/32"\t"action":"allow"\n${k}` });
        expect(r.status).toBe(201);
        rules.push({ id: r.body.id, policy, cidr: r.body.cidr, action });
      }
    }
  }, 120_000);

  afterAll(async () => {
    await close?.();
  });

  const ctxOf = (database: Database) => ({ db: database, publicUrl: s.url }) as unknown as ServerContext;
  const probes = ['10.0.0.1', '10.1.9.9', '10.1.2.3', '192.0.2.77', '198.51.100.7', '198.51.100.8', '203.0.113.200', '203.0.113.1', '8.8.8.8', '2001:db8:1::1', '2001:db8:bad::1', '2001:db9::1', '::ffff:198.51.100.9'];
  const sameAnswers = (set: IpRuleSet, expected: IpRuleSet) => {
    for (const ip of probes) for (const action of ['allow', 'deny'] as const) expect([ip, action, set.holds(addressKey(ip)!, action)]).toEqual([ip, action, expected.holds(addressKey(ip)!, action)]);
    expect(set.size).toBe(expected.size);
    expect(set.hasAllow).toBe(expected.hasAllow);
  };

  it.skipIf(skip)('the whole table reads every rule in batches of text, never through Prisma, and guards as the stored rules do', async () => {
    const w = watched(s.server.db);
    const state = await buildState(ctxOf(w.db), 1);
    expect(w.batches).toEqual([rules.length]);
    // Documents of the other kinds come through Prisma; nothing about the rules does.
    expect(w.prismaCalls.length).toBeGreaterThan(0);
    expect(w.prismaCalls.filter((c) => c.includes('IPPolicyRule') || c.includes('$queryRaw'))).toEqual([]);
    for (const policy of policies) sameAnswers(state.table.ipPolicies.get(policy)!, IpRuleSet.of(rules.filter((r) => r.policy === policy)));
  });

  it.skipIf(skip)('several batches, each one statement, the last id carried to the next; one policy alone', async () => {
    const w = watched(s.server.db);
    const builders = new Map<string, IpRuleSetBuilder>();
    const builderFor = (policy: string) => { let b = builders.get(policy); if (!b) builders.set(policy, (b = new IpRuleSetBuilder())); return b; };
    expect(await loadRules(ctxOf(w.db), builderFor, undefined, 4)).toBe(rules.length);
    const full = Math.floor(rules.length / 4);
    expect(w.batches).toEqual([...Array(full).fill(4), rules.length % 4]);
    expect(w.prismaCalls).toEqual([]);
    for (const policy of policies) sameAnswers(builders.get(policy)!.build(), IpRuleSet.of(rules.filter((r) => r.policy === policy)));

    const mine = rules.filter((r) => r.policy === policies[1]);
    const one = new IpRuleSetBuilder();
    const asked = new Set<string>();
    expect(await loadRules(ctxOf(w.db), (policy) => { asked.add(policy); return one; }, policies[1], 3)).toBe(mine.length);
    expect(asked).toEqual(new Set([policies[1]]));
    sameAnswers(one.build(), IpRuleSet.of(mine));
  });

  it.skipIf(skip)('a rule written while the start reads the table (the API already answers) is applied before the table serves', async () => {
    let taken: LiveTable | undefined;
    let written: string | undefined;
    const hot = {
      ...s.server.db.hot,
      ipRuleLines: async (afterId: string, limit: number, policyId?: string) => {
        const lines = await s.server.db.hot.ipRuleLines(afterId, limit, policyId);
        // After the one batch was read: a deny rule committed, told to the table as serve's afterCommit does.
        if (!written) {
          written = (await s.post('/ip_policy_rules', { ip_policy_id: policies[1], cidr: '198.18.0.7/32', action: 'deny' })).body.id as string;
          await taken!.changed([written]);
        }
        return lines;
      },
    };
    const live = await LiveTable.start(ctxOf({ ...s.server.db, hot }), databaseUrl, () => {}, (t) => { taken = t; });
    try {
      expect(live).toBe(taken);
      // Policy 1 has no 0.0.0.0/0: only the new rule denies this address.
      expect(IpRuleSet.of(rules.filter((r) => r.policy === policies[1])).holds(addressKey('198.18.0.7')!, 'deny')).toBe(false);
      expect(live.now.ipPolicies.get(policies[1])!.holds(addressKey('198.18.0.7')!, 'deny')).toBe(true);
    } finally {
      await live.stop();
      expect((await s.del(`/ip_policy_rules/${written}`)).status).toBe(204);
    }
  });

  // SQLite alone: PostgreSQL reads the documents' JSONB fields (server/store/hot-pg.ts).
  if (db === 'SQLite') it("SQLite reads the rules from their index alone, which follows a rule's CIDR as it changes", async () => {
    // Not one JSON document per rule: each statement reads only the partial index the
    // migration makes (bench/README.md: 0.7 instead of 1.6 CPU seconds for a million rules).
    for (const policy of [false, true]) {
      const plan = await s.server.db.read.$queryRawUnsafe<{ detail: string }[]>(`EXPLAIN QUERY PLAN ${ruleLinesSql(policy)}`, ...(policy ? ['', policies[0], 10] : ['', 10]));
      expect(plan.map((r) => r.detail).join(' | ')).toMatch(/USING COVERING INDEX Resource_ip_rule_idx/);
    }
    const rule = rules.find((r) => r.cidr === '192.0.2.0/24')!;
    expect((await s.patch(`/ip_policy_rules/${rule.id}`, { cidr: '192.0.3.0/24' })).status).toBe(200);
    try {
      const read = new IpRuleSetBuilder();
      await loadRules(ctxOf(s.server.db), (policy) => (policy === rule.policy ? read : undefined), rule.policy);
      const set = read.build();
      expect([set.holds(addressKey('192.0.3.9')!, rule.action), set.holds(addressKey('192.0.2.9')!, rule.action)]).toEqual([true, false]);
    } finally {
      expect((await s.patch(`/ip_policy_rules/${rule.id}`, { cidr: rule.cidr })).status).toBe(200);
    }
  });
});

describe('a batch of rule lines, read in place', () => {
  it('IPv4 parsed where it stands, anything else as a CIDR string; a policy nobody asked for skipped; a malformed line refused', () => {
    const lines = ['ipr_a\tipp_1\t10.0.0.0/8\tdeny', 'ipr_b\tipp_2\t10.0.0.0/8\tallow', 'ipr_c\tipp_1\t2001:db8::/32\tallow', 'ipr_d\tipp_1\t192.0.2.9\tdeny', 'ipr_e\tipp_1\t192.0.2.0/24\tallow'];
    const b = new IpRuleSetBuilder();
    addRuleLines(lines.join('\n'), (policy) => (policy === 'ipp_1' ? b : undefined));
    const set = b.build();
    const expected = IpRuleSet.of([
      { id: 'ipr_a', cidr: '10.0.0.0/8', action: 'deny' }, { id: 'ipr_c', cidr: '2001:db8::/32', action: 'allow' },
      { id: 'ipr_d', cidr: '192.0.2.9/32', action: 'deny' }, { id: 'ipr_e', cidr: '192.0.2.0/24', action: 'allow' },
    ]);
    for (const ip of ['10.9.9.9', '2001:db8::5', '192.0.2.9', '192.0.2.10', '11.0.0.1']) for (const action of ['allow', 'deny'] as const) expect(set.holds(addressKey(ip)!, action)).toBe(expected.holds(addressKey(ip)!, action));
    expect(set.size).toBe(4);
    // Removal finds a rule read in place by its id, as one added through the API.
    expect(set.without('ipr_a')!.holds(addressKey('10.9.9.9')!, 'deny')).toBe(false);
    expect(() => addRuleLines('ipr_x\tipp_1 10.0.0.0/8 deny', () => b)).toThrow(/malformed IP rule line/);
  });
});
