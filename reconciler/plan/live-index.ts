// Live resources indexed by what identifies them (the stack's stamp names, natural-key
// values), built once per kind on first use. The planner looks each document up here in
// constant time; scanning the kind's list for every document made a plan quadratic in the
// number of declared resources (bench/README.md).
import type { LiveResource, LiveState } from '../live/refresh.js';

type Index = Map<string, LiveResource[]>;

function add(index: Index, key: string, l: LiveResource) {
  const list = index.get(key);
  if (list) list.push(l);
  else index.set(key, [l]);
}

export class LiveIndex {
  private readonly stamps = new Map<string, Index>();
  private readonly keys = new Map<string, Index>();
  /** Each resource's place in its kind's list (newest first), to answer in list order. */
  private readonly position = new Map<LiveResource, number>();

  constructor(
    private readonly live: LiveState,
    private readonly stack: string,
  ) {}

  private list(kind: string): LiveResource[] {
    const list = this.live.byKind.get(kind) ?? [];
    if (list.length && !this.position.has(list[0])) list.forEach((l, i) => this.position.set(l, i));
    return list;
  }

  /** The kind's resources stamped by this stack as the document `address`, in list order. */
  stamped(kind: string, address: string): LiveResource[] {
    let index = this.stamps.get(kind);
    if (!index) {
      index = new Map();
      for (const l of this.list(kind)) if (l.stamp?.stack === this.stack && l.stamp.name) add(index, l.stamp.name, l);
      this.stamps.set(kind, index);
    }
    return index.get(address) ?? [];
  }

  /** The kind's resources whose `field` (a value or a list of values) holds any of `values`, in list order. */
  holding(kind: string, field: string, values: readonly string[]): LiveResource[] {
    const name = `${kind}\u0000${field}`;
    let index = this.keys.get(name);
    if (!index) {
      index = new Map();
      for (const l of this.list(kind)) {
        for (const v of new Set([l.read[field]].flat().filter((x) => x != null).map(String))) add(index, v, l);
      }
      this.keys.set(name, index);
    }
    if (values.length === 1) return index.get(values[0]) ?? [];
    const found = new Set(values.flatMap((v) => index.get(v) ?? []));
    return [...found].sort((a, b) => this.position.get(a)! - this.position.get(b)!);
  }
}
