// The shape request_headers and response_headers share: `add` (name -> value) and `remove`
// (names), applied to one header map; names compare in lower case.
export interface HeaderEdits { add: [string, string][]; remove: string[] }

export function headerEdits(config: { add?: Record<string, string>; remove?: string[] }): HeaderEdits {
  return {
    add: Object.entries(config.add ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
    remove: (config.remove ?? []).map((n) => n.toLowerCase()),
  };
}

export function applyEdits(headers: Record<string, unknown>, edits: HeaderEdits) {
  for (const name of edits.remove) delete headers[name];
  for (const [name, value] of edits.add) headers[name] = value;
}
