// Stack kinds: which kinds hold resources stamped by a stack, in one call (docs/api.md,
// "Stack kinds"). The reconciler reads in full only the kinds a manifest declares; a kind
// the manifests no longer declare can still hold what the stack applied, to delete or
// prune. Asking each such kind's list cost one call per kind on every plan; this asks
// them all at once. A stamp is found by a text filter in SQL, then confirmed by reading it
// as the reconciler does (reconciler/live/stamp.ts), so a user's metadata that merely
// mentions the stack's name never counts.
import { z } from 'zod';
import { catalog, type KindEntry } from '../../provider/catalog/index.js';
import { decodeMetadata } from '../../reconciler/live/stamp.js';
import type { Ctx } from '../resources/context.js';
import { extraRoute } from '../resources/routes.js';
import { stackOf } from './stack-locks.js';

export const STACK_KINDS_PATH = '/_edgeform/stack_kinds';
/** Candidate rows read at a time while confirming a kind's stamps. */
const BATCH = 100;

const response = z.object({
  stack: z.string(),
  kinds: z.array(z.string()).describe('The kinds (as manifests and the catalog name them) with at least one resource stamped by the stack, in catalog order; children (IPPolicyRule, HTTPSEdgeRoute) are kinds of their own.'),
});

/** Kinds with a `metadata` field: the only ones a stamp can be in. */
const stampable: KindEntry[] = catalog.filter((k) => 'metadata' in k.fields);

/** LIKE's wildcards in a stack name (`_`) matched literally. */
const likeLiteral = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

function candidates(ctx: Ctx, kind: string, stack: string, afterId: string): Promise<Array<{ id: string; metadata: string | null }>> {
  const sqlite = ctx.db.provider === 'sqlite';
  const metadata = sqlite ? `json_extract("data", '$.body.metadata')` : `("data"->'body'->>'metadata')`;
  const p = (n: number) => (sqlite ? '?' : `$${n}`);
  // Every stamp holds the key "edgeform" and the stack's name as a JSON string.
  const sql = `SELECT "id", ${metadata} AS "metadata" FROM "Resource"
    WHERE "kind" = ${p(1)} AND "id" > ${p(2)} AND ${metadata} LIKE ${p(3)} ESCAPE '\\' AND ${metadata} LIKE ${p(4)} ESCAPE '\\'
    ORDER BY "id" LIMIT ${BATCH}`;
  return ctx.db.read.$queryRawUnsafe(sql, kind, afterId, '%"edgeform"%', `%${likeLiteral(JSON.stringify(stack))}%`);
}

/** Whether any resource of `kind` carries a stamp of `stack`. */
async function holdsStamp(ctx: Ctx, kind: string, stack: string): Promise<boolean> {
  for (let after = ''; ;) {
    const rows = await candidates(ctx, kind, stack, after);
    if (rows.some((r) => decodeMetadata(r.metadata).stamp?.stack === stack)) return true;
    if (rows.length < BATCH) return false;
    after = rows[rows.length - 1].id;
  }
}

extraRoute({
  method: 'GET',
  path: `${STACK_KINDS_PATH}/{stack}`,
  summary: 'The kinds holding resources stamped by a stack (edgeform extension)',
  tag: 'Extensions',
  status: 200,
  response,
  handle: async (ctx, req) => {
    const stack = stackOf(req.params);
    const kinds: string[] = [];
    for (const k of stampable) if (await holdsStamp(ctx, k.kind, stack)) kinds.push(k.kind);
    return { stack, kinds };
  },
});
