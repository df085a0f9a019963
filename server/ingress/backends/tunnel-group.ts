// A tunnel-group backend's choice: the online tunnels of every instance whose labels include
// every label of the backend, taken in turn (round robin per backend). With `preferred` (the
// instance's --peer-choice prefer-local), the turn goes over the preferred matching tunnels
// only, and over all of them when none is preferred.

/** Round-robin turns by key (a backend, a pool): each pick takes the next of the members given. */
export class Turns {
  private next = new Map<string, number>();

  pick<T>(key: string, members: readonly T[]): T | undefined {
    if (!members.length) return undefined;
    const turn = this.next.get(key) ?? 0;
    this.next.set(key, (turn + 1) % 1_000_000);
    return members[turn % members.length];
  }

  forget(key: string) {
    this.next.delete(key);
  }
}

const turns = new Turns();

export function labelsMatch(want: Record<string, string> | undefined, have: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(want ?? {})) if (have[k] !== v) return false;
  return true;
}

export function pickTunnel(backend: { id: string; labels?: Record<string, string> }, tunnels: ReadonlyMap<string, Readonly<Record<string, string>>>, skip?: (tunnelId: string) => boolean, preferred?: (tunnelId: string) => boolean): string | undefined {
  let matching: string[] = [];
  for (const [id, labels] of tunnels) if (labelsMatch(backend.labels, labels) && !skip?.(id)) matching.push(id);
  if (!matching.length) return undefined;
  if (preferred) {
    const mine = matching.filter(preferred);
    if (mine.length) matching = mine;
  }
  return turns.pick(backend.id, matching);
}
