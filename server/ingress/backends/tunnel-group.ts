// A tunnel-group backend's choice: the online tunnels of this server whose labels include
// every label of the backend, taken in turn (round robin per backend).

const turns = new Map<string, number>();

export function labelsMatch(want: Record<string, string> | undefined, have: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(want ?? {})) if (have[k] !== v) return false;
  return true;
}

export function pickTunnel(backend: { id: string; labels?: Record<string, string> }, tunnels: ReadonlyMap<string, Readonly<Record<string, string>>>, skip?: (tunnelId: string) => boolean): string | undefined {
  const matching: string[] = [];
  for (const [id, labels] of tunnels) if (labelsMatch(backend.labels, labels) && !skip?.(id)) matching.push(id);
  if (!matching.length) return undefined;
  const turn = turns.get(backend.id) ?? 0;
  turns.set(backend.id, (turn + 1) % 1_000_000);
  return matching[turn % matching.length];
}
