// Kind-specific behaviour behind a small interface; the generic engine makes every other
// decision. A kind without an entry here is handled entirely by the catalog.
import type { KindEntry } from '../../provider/catalog/index.js';
import type { Rows, Writes } from '../store/hot-writes.js';
import type { Ctx } from './context.js';

export type Doc = Record<string, any>;

export interface StoredResource {
  id: string;
  kind: string;
  parentId: string | null;
  createdAt: Date;
  /** createdAt as the database's text, when it was read as text: the read form takes it as it is. */
  readonly createdText?: string;
  body: Doc;
  computed: Doc;
  /** Write-only values of the body, keyed by path. */
  secretFields: Record<string, unknown>;
  /** Values the server keeps for itself (generated private keys). */
  internal: Doc;
}

export interface Prepared {
  /** The document to store, if the behaviour changed it (server defaults filled in). */
  body?: Doc;
  computed?: Doc;
  internal?: Doc;
}

export interface Behaviour {
  /**
   * Checks and computed values for a validated document before it is stored. On update in
   * the write transaction (`prior` is the stored resource, `tx` the transaction); on create
   * before it opens (no `prior`, no `tx`: expensive work such as key generation holds no lock).
   */
  prepare?(args: { kind: KindEntry; id: string; body: Doc; prior?: StoredResource; ctx: Ctx; tx?: Writes }): Promise<Prepared | void> | Prepared | void;
  /** After the row is written, in the same transaction. Returns fields shown only in the creation response. */
  created?(args: { kind: KindEntry; id: string; body: Doc; ctx: Ctx; tx: Writes }): Promise<Doc | void>;
  /** Checks before a resource is changed in place (PATCH, module PUT or DELETE), before its new document is validated, in the write transaction. */
  changing?(args: { kind: KindEntry; row: StoredResource; ctx: Ctx }): void;
  /** Checks before a resource is deleted by a caller (not when it goes with a deleted parent or owner), in the delete transaction. */
  deleting?(args: { kind: KindEntry; row: StoredResource; ctx: Ctx; tx: Writes }): Promise<void> | void;
  /**
   * Whether a committed write of this kind may change who a bearer token authenticates as
   * (keys, credentials, their owners): the caller cache is then forgotten (caller-cache.ts).
   */
  guardsCallers?: boolean;
  /** Read-time fields (computed from other rows, read from `rows`, or the server's settings). */
  read?(args: { kind: KindEntry; row: StoredResource; out: Doc; ctx: Ctx; rows: Rows }): Promise<void> | void;
}

const registry = new Map<string, Behaviour>();

export function behaviour(kind: string, b: Behaviour) {
  registry.set(kind, { ...registry.get(kind), ...b });
}

export const behaviourOf = (kind: string): Behaviour => registry.get(kind) ?? {};
