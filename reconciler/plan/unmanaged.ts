// `plan --show-unmanaged`: live resources of the declared kinds that no stack manages (no
// stamp) and the plan does not take over, so a team sees what was made by hand
// (hashicorp/terraform#26558). From the lists refresh already read: no extra API call.
import type { LiveState } from '../live/refresh.js';
import type { Manifest } from '../manifest/validate.js';
import type { Plan } from './types.js';

export interface Unmanaged {
  kind: string;
  id: string;
  /** What tells it apart for a reader: its description, name or hostports. */
  label: string;
}

export function unmanagedResources(manifest: Manifest, live: LiveState, plan: Plan): Unmanaged[] {
  const kinds = new Set(manifest.documents.map((d) => d.kind));
  const planned = new Set(plan.changes.map((c) => c.id).filter(Boolean));
  const out: Unmanaged[] = [];
  for (const kind of kinds) {
    for (const l of live.byKind.get(kind) ?? []) {
      if (l.stamp || planned.has(l.id)) continue;
      const r = l.read;
      const label = [r.name, r.description, Array.isArray(r.hostports) && r.hostports.length ? r.hostports.join(', ') : undefined].filter((v) => typeof v === 'string' && v !== '').join(' — ');
      out.push({ kind, id: l.id, label });
    }
  }
  return out.sort((a, b) => a.kind.localeCompare(b.kind) || a.id.localeCompare(b.id));
}

export function unmanagedText(list: readonly Unmanaged[]): string {
  if (!list.length) return '\nNo unmanaged resources of the declared kinds: every one is managed by a stack.\n';
  const lines = list.map((u) => `  ${u.kind} ${u.id}${u.label ? `  (${u.label})` : ''}`);
  return `\nUnmanaged resources of the declared kinds (${list.length}; no stack manages them: made by hand, or by another tool). Adopt one with "id:" in its document, or --adopt by natural key:\n${lines.join('\n')}\n`;
}
