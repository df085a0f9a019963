// The API key a command authenticates with is never deleted by that command, nor replaced,
// nor taken away with what it belongs to (a key whose owner is deleted goes with it), nor
// stopped by deactivating its owner: the run would lose its access half-way, and everyone
// using the key theirs. The server names
// the key on every response (`Service-Api-Key-Id`, docs/api.md); a plan that would remove
// it is refused like one that breaks prevent_destroy, with the way out.
import { liveInput } from '../../provider/catalog/normalize.js';
import { collectRefs } from '../../provider/catalog/walk.js';
import type { LiveState } from '../live/refresh.js';
import type { Change, Operation } from './types.js';

const OTHER_KEY = 'authenticate with another API key (EDGEFORM_API_KEY or --api-key)';

/** Why the operations cannot run with the key `keyId` (none when they leave it alone, or the key is unknown). */
export function callerKeyProblems(changes: readonly Change[], operations: readonly Operation[], live: LiveState, keyId: string | undefined): string[] {
  if (!keyId) return [];
  const key = live.byId.get(keyId);
  // What the key goes with when deleted: the resources it refers to with a cascade (its owner).
  const holders = new Map<string, string>();
  if (key) {
    for (const r of collectRefs(key.entry.fields, liveInput(key.entry, key.read))) {
      if (r.ref.onDelete === 'cascade') for (const id of r.ids) holders.set(id, r.path);
    }
  }
  const changeOf = new Map(changes.map((c) => [c.address, c]));
  const problems: string[] = [];
  for (const o of operations) {
    // Deactivating the key's owner (a bot user) stops the key as surely as deleting it.
    if (o.method === 'update' && o.body?.active === false && o.id !== undefined && holders.has(o.id)) {
      problems.push(`${o.address} owns the API key this command authenticates with (${keyId}): deactivating it would lock this run, and everyone using the key, out; ${OTHER_KEY} to deactivate it`);
      continue;
    }
    if (o.method !== 'delete') continue;
    const c = changeOf.get(o.address);
    const replaced = c?.actions.length === 2;
    if (o.touches.includes(keyId)) {
      problems.push(
        replaced
          ? `changing ${(c!.replacePaths ?? []).map((p) => p.slice(1)).join(', ') || 'it'} replaces ${o.address}, the API key this command authenticates with (${keyId}): the old key would be deleted and this run locked out; undo the change, or ${OTHER_KEY} to replace it`
          : `${o.address} is the API key this command authenticates with (${keyId}): deleting it would lock this run, and everyone using the key, out; ${OTHER_KEY} to delete it, or keep it declared in the manifests`,
      );
      continue;
    }
    for (const [id, field] of holders) {
      if (!o.touches.includes(id)) continue;
      problems.push(`${replaced ? 'replacing' : 'deleting'} ${o.address} deletes the API key this command authenticates with (${keyId}, whose ${field} it is), locking this run out; ${OTHER_KEY} to ${replaced ? 'replace' : 'delete'} it`);
    }
  }
  return [...new Set(problems)];
}
