// The plan is data: a list of changes (what the user reads) and a graph of API operations
// (what apply runs). Renderers only read changes; the executor only reads operations; a
// saved plan is this object written to a file.
import type { Operation as JsonPatchOp } from 'fast-json-patch';

type Doc = Record<string, any>;

/** Terraform's encoding of what happens to one resource. */
export type Action = 'create' | 'update' | 'delete' | 'no-op';

export interface Change {
  /** `Kind/name`, or `Kind/name.routes["/api"]` for a child. */
  address: string;
  kind: string;
  name: string;
  /** `["create"]`, `["update"]`, `["delete"]`, `["delete","create"]` or `["create","delete"]` (replace), `["no-op"]`. */
  actions: Action[];
  /** Normalised live document (write-only values masked), or null. */
  before: Doc | null;
  /** Normalised desired document (write-only values masked; references not yet known as `Kind/name`), or null. */
  after: Doc | null;
  /** JSON Patch from before to after. */
  patch: JsonPatchOp[];
  /** Paths (JSON Pointer) whose change forces the replacement. */
  replacePaths?: string[];
  /** Write-only values change (they are compared by fingerprint, never shown). */
  sensitiveChanged?: boolean;
  /** The live resource differs from what edgeform last applied: someone changed it outside edgeform. */
  drift?: boolean;
  /** The resource exists but was not managed by this stack until now (adoption). */
  adopt?: boolean;
  /**
   * A child deleted because its parent's document no longer lists it (the parent's address):
   * part of the parent's document, as Terraform's nested blocks, so no --prune is needed.
   */
  removedFrom?: string;
  /** The address edgeform last applied this resource as, when the document was renamed (Terraform's `previous_address`). */
  movedFrom?: string;
  /** Why the resource is replaced when no field forces it (a token_file that does not exist). */
  replaceReason?: string;
  /** Refresh-only: a declared resource that does not exist (deleted outside edgeform, or never applied). */
  deletedOutside?: boolean;
  /** The address of the resource whose delete takes this one with it (the server cascades: a bot's API keys). */
  deletedWith?: string;
  /** The live id, when the resource exists. */
  id?: string;
  /** The file a create writes the once-returned token to (the document's token_file). */
  tokenFile?: string;
  /** The live parent's id (children). */
  parentId?: string;
  /** Operations (indexes into Plan.operations) that carry this change out. */
  operations: number[];
}

/** Where an operation finds an id that may not exist until another operation has run: an id, or a `Kind/name` address. */
export type IdOrAddress = string;

export interface Operation {
  index: number;
  method: 'create' | 'update' | 'put_module' | 'delete_module' | 'delete';
  /** Catalog kind. */
  kind: string;
  /** The resource (update, module and delete operations). */
  id?: IdOrAddress;
  /** The parent (children). */
  parent?: IdOrAddress;
  module?: string;
  /** Request body; references may be `Kind/name`, resolved when the operation runs. */
  body?: Doc;
  /** The address whose id a create assigns. */
  assigns?: string;
  /** Where a create writes the values the server returns only once (an API key's token), mode 0600. */
  tokenFile?: string;
  /** Operations that must finish first. */
  after: number[];
  /** The change this operation belongs to. */
  address: string;
  /** Ids of live resources this operation changes or removes (children a delete takes with it included). */
  touches: string[];
}

export interface Plan {
  stack: string;
  /** API base URL the plan was made against. */
  apiUrl: string;
  createdAt: string;
  mode: 'apply' | 'destroy' | 'refresh-only';
  changes: Change[];
  operations: Operation[];
  /** Managed resources no longer declared, left alone without --prune. */
  orphans: string[];
  /** Live fingerprints of every resource the plan touches, to refuse a stale saved plan. */
  fingerprints: Record<string, string | null>;
  /** API calls made to build the plan. */
  apiCalls: number;
  /** --target / --exclude narrowed the plan (a saved plan keeps saying so). */
  targeted?: { targets: string[]; excludes: string[] };
}

export const isNoop = (c: Change) => c.actions.length === 1 && c.actions[0] === 'no-op';

export function summarize(changes: readonly Change[]) {
  let add = 0;
  let change = 0;
  let destroy = 0;
  for (const c of changes) {
    if (c.actions.includes('create')) add++;
    if (c.actions.includes('delete')) destroy++;
    if (c.actions.includes('update')) change++;
  }
  return { add, change, destroy };
}
