// Which kinds a plan reads. The declared kinds, in full; of the rest, only those that still
// hold something the stack applied (a kind no document declares any more: its resources
// are to be deleted, or pruned). The server says which in one call
// (GET /_edgeform/stack_kinds/{stack}, docs/api.md "Stack kinds"); a server without that
// extension gets every kind read, one list call or more each, as before it existed.
import { ApiClientError, type ApiClient } from '../../provider/client/index.js';
import { kindOf, type KindEntry } from '../../provider/catalog/index.js';
import { refTraitsOf } from '../../provider/catalog/walk.js';
import { manifestKinds } from '../manifest/kinds.js';

export const STACK_KINDS_PATH = '/_edgeform/stack_kinds';

/** The catalog kinds holding resources stamped by `stack`; undefined when the server cannot say. */
export async function stampedKinds(client: ApiClient, stack: string): Promise<string[] | undefined> {
  let answer: { kinds?: unknown };
  try {
    answer = await client.call('GET', `${STACK_KINDS_PATH}/${encodeURIComponent(stack)}`);
  } catch (e) {
    if (e instanceof ApiClientError && (e.status === 404 || e.status === 405 || e.status === 501)) return undefined;
    throw e;
  }
  const kinds = answer?.kinds;
  if (!Array.isArray(kinds) || !kinds.every((k) => typeof k === 'string')) {
    throw new Error(`GET ${STACK_KINDS_PATH}/${stack} answered ${JSON.stringify(answer).slice(0, 200)}, not a list of kinds; is the API URL an edgeform server?`);
  }
  return kinds;
}

/** The manifest kind a kind's resources are read with: itself, or the top of its parents (a rule: its policy). */
function readWith(kind: string): string | undefined {
  let entry: KindEntry;
  try {
    entry = kindOf(kind);
  } catch {
    return undefined; // a kind this edgeform does not know (a newer server): it cannot manage it either
  }
  while (entry.parent) entry = kindOf(entry.parent.kind);
  return entry.kind;
}

/**
 * The manifest kinds whose resources the server deletes with a resource of `kind` (a bot's
 * API keys and credentials, through a cascading `owner_id`): the plan lists them with it,
 * refuses when one is another stack's, and refuses to delete the bot owning the API key it
 * runs with (plan/caller-key.ts), so they are read whenever `kind` is.
 */
const cascadesFrom = (kind: string): KindEntry[] =>
  manifestKinds.filter((k) => refTraitsOf(k.fields).some((r) => r.onDelete === 'cascade' && r.to.includes(kind)));

/**
 * The kinds a plan of `declared` reads for `stack`: the declared ones, those holding
 * something the stack applied, and what their deletion takes with it. Reading only the
 * declared kinds hid a kind the manifests dropped while it still held what the stack
 * applied (an edge, with its hostports), and the plan said "No changes".
 */
export async function kindsToRead(client: ApiClient, stack: string, declared: Iterable<string>): Promise<KindEntry[]> {
  const stamped = await stampedKinds(client, stack);
  if (!stamped) return [...manifestKinds];
  const want = new Set([...declared, ...stamped.map(readWith)].filter((k): k is string => !!k));
  for (const kind of want) for (const k of cascadesFrom(kind)) want.add(k.kind);
  return manifestKinds.filter((k) => want.has(k.kind));
}
