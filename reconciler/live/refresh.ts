// Live state through list endpoints only (100 per page): never one GET per resource.
// Children come inside their parent's read form when the catalog embeds them (routes in
// edges), else from one list of the child kind grouped by parent (rules by policy).
import type { ApiClient } from '../../provider/client/index.js';
import type { KindEntry } from '../../provider/catalog/index.js';
import { readKey } from '../../provider/catalog/define.js';
import { childSpecsOf, type ChildSpec } from '../manifest/kinds.js';
import { decodeMetadata, type Stamp } from './stamp.js';

type Doc = Record<string, any>;

export interface LiveChild {
  spec: ChildSpec;
  id: string;
  key: string;
  read: Doc;
  stamp?: Stamp;
  userMetadata: string;
}

export interface LiveResource {
  entry: KindEntry;
  id: string;
  read: Doc;
  stamp?: Stamp;
  userMetadata: string;
  children: Record<string, LiveChild[]>;
}

export interface LiveState {
  byKind: Map<string, LiveResource[]>;
  byId: Map<string, LiveResource>;
  /** Kinds that were read (others are unknown, not empty). */
  kinds: Set<string>;
}

const decode = (read: Doc) => {
  const d = decodeMetadata(typeof read.metadata === 'string' ? read.metadata : undefined);
  return { stamp: d.stamp, userMetadata: d.user };
};

/** Reads every resource of the given kinds, with their children, in parallel. */
export async function refresh(client: ApiClient, kinds: readonly KindEntry[]): Promise<LiveState> {
  const state: LiveState = { byKind: new Map(), byId: new Map(), kinds: new Set() };
  await Promise.all(
    kinds.map(async (entry) => {
      const specs = childSpecsOf(entry.kind);
      const [items, ...childLists] = await Promise.all([client.list(entry), ...specs.map((s) => (s.entry.spec.parent?.embedded ? Promise.resolve(undefined) : client.list(s.entry)))]);
      const grouped = specs.map((s, i) => {
        const list = childLists[i];
        if (!list) return undefined;
        const key = readKey(s.parentField, s.entry.fields[s.parentField]);
        const byParent = new Map<string, Doc[]>();
        for (const c of list) {
          const pid = typeof c[key] === 'string' ? c[key] : c[key]?.id;
          byParent.set(pid, [...(byParent.get(pid) ?? []), c]);
        }
        return byParent;
      });
      // Agents' rows of a collection (agent endpoints among cloud ones) are no manifest's to manage.
      const agents = entry.spec.madeByAgents;
      const resources = (agents ? items.filter((read) => !agents(read)) : items).map((read): LiveResource => {
        const children: Record<string, LiveChild[]> = {};
        specs.forEach((s, i) => {
          // Oldest first, as embedded children are; lists are newest first.
          const reads: Doc[] = grouped[i] ? [...(grouped[i]!.get(read.id) ?? [])].reverse() : (read[s.key] ?? []);
          children[s.key] = reads.map((c) => ({ spec: s, id: c.id, key: String(c[s.naturalKey]), read: c, ...decode(c) }));
        });
        return { entry, id: read.id, read, ...decode(read), children };
      });
      state.byKind.set(entry.kind, resources);
      for (const r of resources) state.byId.set(r.id, r);
      state.kinds.add(entry.kind);
    }),
  );
  return state;
}
