// The reads every API request makes outside a write (get one, a page, the embedded
// children), as prepared statements on the database handle the driver adapter already
// holds, instead of through Prisma's query engine (which cost ten times the statement
// itself: bench/README.md, "The API's hot path"). One small module per database
// (hot-sqlite.ts, hot-pg.ts) implements this; the engine calls only this interface, and
// writes, with everything read inside them, stay on Prisma.

/** A Resource row as Prisma returns it: `data` parsed, dates as Dates. */
export interface ResourceRow {
  id: string;
  kind: string;
  parentId: string | null;
  createdAt: Date;
  updatedAt: Date;
  data: unknown;
  sealed: string | null;
  /** createdAt as the database's text, when the row was read as text (TextRow). */
  readonly createdText?: string;
}

/**
 * A row the hot reads and writes read, its timestamps kept as the database's RFC 3339 text
 * and made Dates only when something asks: a read form wants the text (readTime in events/outbox.ts), and a GET
 * of a policy with one rule turned four texts into Dates and two Dates back into text
 * (bench/README.md, "GET one on SQLite: the tail").
 */
export class TextRow implements ResourceRow {
  constructor(
    readonly id: string,
    readonly kind: string,
    readonly parentId: string | null,
    readonly createdText: string,
    readonly updatedText: string,
    readonly data: unknown,
    readonly sealed: string | null,
  ) {}

  get createdAt() { return new Date(this.createdText); }
  get updatedAt() { return new Date(this.updatedText); }
}

export interface HotReads {
  /** The row with this id, committed data only. */
  resource(id: string): Promise<ResourceRow | undefined>;
  /** Up to `limit` rows of a kind, newest first (ids sort by creation), ids below `beforeId` when given. */
  page(kind: string, limit: number, beforeId?: string): Promise<ResourceRow[]>;
  /** The rows of `kind` whose parent is one of `parentIds`, in id order. */
  children(kind: string, parentIds: string[]): Promise<ResourceRow[]>;
  /** Every row of a kind, in id order (read-time fields that match rows of another kind). */
  ofKind(kind: string): Promise<ResourceRow[]>;
  /** The row (an API key, a credential) holding the token with this SHA-256 digest. */
  tokenHolder(digest: string): Promise<ResourceRow | undefined>;
  /**
   * Up to `limit` IP policy rules (of one policy when given) with ids above `afterId`, in id
   * order, as one text the database puts together: a line per rule, `id TAB policy id TAB
   * cidr TAB action`, lines joined by LF (in no particular order), and the last id and how
   * many. A million rules are read at start this way in 20 statements, with no object per
   * rule (ingress/table.ts loadRules).
   */
  ipRuleLines(afterId: string, limit: number, policyId?: string): Promise<RuleLines>;
}

/** A batch of IP policy rules as text (HotReads.ipRuleLines). */
export interface RuleLines {
  text: string;
  /** The greatest id in the batch ('' when it is empty). */
  last: string;
  n: number;
}

/** The rules' kind, as stored (catalog/ip-policies.ts ipPolicyRule.kind). */
export const IP_RULE_KIND = 'IPPolicyRule';

/** What finding a token's holder reads: the hot reads outside a transaction, Prisma's inside one (prisma-rows.ts). */
export type TokenRows = Pick<HotReads, 'tokenHolder' | 'resource'>;

/**
 * SQLite's lookups of children name their index: without planner statistics (a database
 * analyzed while small, fewer than a thousand writes since: db.ts) SQLite picked the
 * (kind, id) index for the ORDER BY and read every row of the kind (63 µs at 200 rules
 * against 11 µs; milliseconds at thousands). Children are always few per parent.
 */
export const BY_PARENT = 'INDEXED BY "Resource_parentId_idx"';

/** The columns every statement selects, in the schema's names. */
export const COLUMNS = '"id", "kind", "parentId", "createdAt", "updatedAt", "data", "sealed"';
