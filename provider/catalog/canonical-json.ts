// Canonical JSON: object keys sorted and undefined values left out, so equal values give
// equal text whatever their key order. The reconciler hashes it (the stamp's `h`); the
// server keys it (secret fingerprints); both must agree on it, so it lives here, once.

const isObject = (v: unknown): v is Record<string, unknown> => v != null && typeof v === 'object' && !Array.isArray(v);

export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value).sort().filter((k) => value[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}
