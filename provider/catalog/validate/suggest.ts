// "Did you mean": the nearest names to a mistyped one, by edit distance. One helper for
// every place a user can mistype a name (kinds, fields, references, action types).

/** Levenshtein distance, case-insensitive (a kind typed `httpsedge` is one step from none). */
export function distance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length];
}

/** The candidates nearest to `word`, within a third of its length (at least 2 edits) and one edit of the nearest; nearest first, at most 3. */
export function nearest(word: string, candidates: Iterable<string>): string[] {
  const limit = Math.max(2, Math.floor(word.length / 3));
  const scored: [string, number][] = [];
  for (const c of new Set(candidates)) {
    if (c === word) continue;
    const d = distance(word, c);
    if (d <= limit) scored.push([c, d]);
  }
  scored.sort((x, y) => x[1] - y[1] || x[0].localeCompare(y[0]));
  // A clearly nearer name stands alone: `httpsedge` means HTTPSEdge, not also TCPEdge.
  const best = scored[0]?.[1] ?? 0;
  return scored.filter(([, d]) => d <= best + 1).slice(0, 3).map(([c]) => c);
}

/** ` (did you mean X?)`, or '' when nothing is near. */
export function didYouMean(word: string, candidates: Iterable<string>, quote = false): string {
  const near = nearest(word, candidates).map((c) => (quote ? JSON.stringify(c) : c));
  return near.length ? ` (did you mean ${near.join(' or ')}?)` : '';
}
