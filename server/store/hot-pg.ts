// The hot reads on PostgreSQL: named (server-side prepared) statements on the pool the
// driver adapter holds (db.ts). Outside a transaction each sees committed rows only.
// Timestamps are read as RFC 3339 text in UTC, as Prisma writes them (no time zone).
import type { Pool } from 'pg';
import { IP_RULE_KIND, TextRow, type HotReads, type ResourceRow } from './hot-reads.js';

// to_char, not ::text, whose form follows the session's DateStyle.
const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;
export const SELECT = `SELECT "id", "kind", "parentId", to_char("createdAt", ${ISO}) AS "createdAt", to_char("updatedAt", ${ISO}) AS "updatedAt", "data", "sealed" FROM "Resource"`;
export type Raw = Omit<ResourceRow, 'createdAt' | 'updatedAt'> & { createdAt: string; updatedAt: string };

export const toRow = (r: Raw): ResourceRow => new TextRow(r.id, r.kind, r.parentId, r.createdAt, r.updatedAt, r.data, r.sealed);

/** A batch of IP policy rules as one text (HotReads.ipRuleLines): the fields out of the JSONB and the lines joined by PostgreSQL. */
const ruleLines = (policy: boolean) => `SELECT coalesce(string_agg("id" || E'\\t' || coalesce("parentId", '') || E'\\t' || coalesce("data"->'body'->>'cidr', '') || E'\\t' || coalesce("data"->'body'->>'action', ''), E'\\n'), '') AS "text", coalesce(max("id"), '') AS "last", count(*)::int AS "n" FROM (SELECT "id", "parentId", "data" FROM "Resource" WHERE "kind" = $1 AND "id" > $2${policy ? ' AND "parentId" = $4' : ''} ORDER BY "id" LIMIT $3) AS "batch"`;

export function hotReadsPg(pool: Pool): HotReads {
  const run = async (name: string, text: string, values: unknown[]) => ((await pool.query({ name, text, values })).rows as Raw[]).map(toRow);
  return {
    async resource(id) {
      const [row] = await run('edgeform_hot_one', `${SELECT} WHERE "id" = $1`, [id]);
      return row;
    },
    page(kind, limit, beforeId) {
      return beforeId === undefined
        ? run('edgeform_hot_first', `${SELECT} WHERE "kind" = $1 ORDER BY "id" DESC LIMIT $2`, [kind, limit])
        : run('edgeform_hot_after', `${SELECT} WHERE "kind" = $1 AND "id" < $2 ORDER BY "id" DESC LIMIT $3`, [kind, beforeId, limit]);
    },
    ofKind(kind) {
      return run('edgeform_hot_kind', `${SELECT} WHERE "kind" = $1 ORDER BY "id"`, [kind]);
    },
    children(kind, parentIds) {
      return run('edgeform_hot_children', `${SELECT} WHERE "kind" = $1 AND "parentId" = ANY($2) ORDER BY "id"`, [kind, parentIds]);
    },
    async ipRuleLines(afterId, limit, policyId) {
      const { rows } = policyId === undefined
        ? await pool.query({ name: 'edgeform_hot_rules', text: ruleLines(false), values: [IP_RULE_KIND, afterId, limit] })
        : await pool.query({ name: 'edgeform_hot_policy_rules', text: ruleLines(true), values: [IP_RULE_KIND, afterId, limit, policyId] });
      return rows[0] as { text: string; last: string; n: number };
    },
    async tokenHolder(digest) {
      const [row] = await run('edgeform_hot_token', `${SELECT} WHERE "id" = (SELECT "resourceId" FROM "Token" WHERE "digest" = $1)`, [digest]);
      return row;
    },
  };
}
