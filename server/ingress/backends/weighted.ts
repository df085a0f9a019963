// A weighted backend's choice for one request: child i with probability weight_i / sum;
// a weight of 0 is never chosen.

/** The chosen child id, or undefined when no weight is above 0. */
export function pickWeighted(weights: Record<string, number>, random: () => number): string | undefined {
  let total = 0;
  for (const w of Object.values(weights)) if (w > 0) total += Number(w);
  if (total <= 0) return undefined;
  let at = random() * total;
  let last: string | undefined;
  for (const [id, w] of Object.entries(weights)) {
    if (!(w > 0)) continue;
    last = id;
    at -= Number(w);
    if (at < 0) return id;
  }
  return last;
}
