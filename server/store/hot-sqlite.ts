// The hot reads on SQLite: statements prepared once on the read-only connection (db.ts),
// run synchronously by better-sqlite3. Dates are stored as RFC 3339 text, JSON as text.
import type BetterSqlite3 from 'better-sqlite3';
import { BY_PARENT, COLUMNS, IP_RULE_KIND, TextRow, type HotReads, type ResourceRow, type RuleLines } from './hot-reads.js';

export type Raw = { id: string; kind: string; parentId: string | null; createdAt: string; updatedAt: string; data: string; sealed: string | null };

export const toRow = (r: Raw): ResourceRow => new TextRow(r.id, r.kind, r.parentId, r.createdAt, r.updatedAt, JSON.parse(r.data), r.sealed);

/** Children statements by how many parents they take (a page has up to 100). */
const PARENT_BATCH = 100;

/** The children of `n` parents, of one kind, in id order. */
export const childrenSql = (n: number) => `SELECT ${COLUMNS} FROM "Resource" ${BY_PARENT} WHERE "kind" = ? AND "parentId" IN (${Array(n).fill('?').join(', ')}) ORDER BY "id"`;

/**
 * A batch of IP policy rules as one text (HotReads.ipRuleLines), the lines joined by SQLite,
 * read from the partial index "Resource_ip_rule_idx" alone (migration
 * 20261128103500_ip_rule_index), which holds each rule's id, policy, CIDR and action: no JSON
 * document is read. Its expressions and its `"kind" = 'IPPolicyRule'` are written here exactly
 * as in the index (a bound kind would not prove the index's WHERE); INDEXED BY because the
 * planner otherwise takes the (kind, id) index and reads each document (1.6 instead of 0.7 CPU
 * seconds for a million rules). A row handed to JavaScript one at a time costs more than the
 * rule (bench/README.md, "A million IP rules").
 */
export const ruleLinesSql = (policy: boolean) => `SELECT group_concat("id" || char(9) || coalesce("parentId", '') || char(9) || coalesce("cidr", '') || char(9) || coalesce("action", ''), char(10)) AS "text", max("id") AS "last", count(*) AS "n" FROM (SELECT "id", "parentId", "data" ->> '$.body.cidr' AS "cidr", "data" ->> '$.body.action' AS "action" FROM "Resource" INDEXED BY "Resource_ip_rule_idx" WHERE "kind" = '${IP_RULE_KIND}' AND "id" > ?${policy ? ' AND "parentId" = ?' : ''} ORDER BY "kind", "id" LIMIT ?)`;

export function hotReadsSqlite(db: BetterSqlite3.Database): HotReads {
  const one = db.prepare(`SELECT ${COLUMNS} FROM "Resource" WHERE "id" = ?`);
  const first = db.prepare(`SELECT ${COLUMNS} FROM "Resource" WHERE "kind" = ? ORDER BY "id" DESC LIMIT ?`);
  const after = db.prepare(`SELECT ${COLUMNS} FROM "Resource" WHERE "kind" = ? AND "id" < ? ORDER BY "id" DESC LIMIT ?`);
  const all = db.prepare(`SELECT ${COLUMNS} FROM "Resource" WHERE "kind" = ? ORDER BY "id"`);
  const holder = db.prepare(`SELECT ${COLUMNS} FROM "Resource" WHERE "id" = (SELECT "resourceId" FROM "Token" WHERE "digest" = ?)`);
  const ruleLines = (policy: boolean) => db.prepare(ruleLinesSql(policy)).safeIntegers(false);
  const rules = ruleLines(false);
  const policyRules = ruleLines(true);
  const byParents = new Map<number, BetterSqlite3.Statement>();
  const childrenOf = (n: number) => {
    let stmt = byParents.get(n);
    if (!stmt) {
      stmt = db.prepare(childrenSql(n));
      byParents.set(n, stmt);
    }
    return stmt;
  };
  return {
    async resource(id) {
      const row = one.get(id) as Raw | undefined;
      return row && toRow(row);
    },
    async page(kind, limit, beforeId) {
      const rows = (beforeId === undefined ? first.all(kind, limit) : after.all(kind, beforeId, limit)) as Raw[];
      return rows.map(toRow);
    },
    async ofKind(kind) {
      return (all.all(kind) as Raw[]).map(toRow);
    },
    async tokenHolder(digest) {
      const row = holder.get(digest) as Raw | undefined;
      return row && toRow(row);
    },
    async ipRuleLines(afterId, limit, policyId) {
      const r = (policyId === undefined ? rules.get(afterId, limit) : policyRules.get(afterId, policyId, limit)) as { text: string | null; last: string | null; n: number };
      return { text: r.text ?? '', last: r.last ?? '', n: r.n } satisfies RuleLines;
    },
    async children(kind, parentIds) {
      const out: ResourceRow[] = [];
      for (let i = 0; i < parentIds.length; i += PARENT_BATCH) {
        const ids = parentIds.slice(i, i + PARENT_BATCH);
        out.push(...(childrenOf(ids.length).all(kind, ...ids) as Raw[]).map(toRow));
      }
      // Batches each come in id order; together they need one more sort.
      return parentIds.length > PARENT_BATCH ? out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)) : out;
    },
  };
}
