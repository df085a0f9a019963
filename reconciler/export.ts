// `edgeform export`: manifests for live resources, written so that `plan` on them right
// away shows no changes. References between exported resources become `Kind/name`;
// write-only values, which the API never returns, become `${env:...}` placeholders.
import { isDeepStrictEqual } from 'node:util';
import { stringify } from 'yaml';
import { z } from 'zod';
import type { ApiClient } from '../provider/client/index.js';
import { traitsOf, type KindEntry } from '../provider/catalog/index.js';
import { liveInput } from '../provider/catalog/normalize.js';
import { mapRefs, pathText, schemaAt, type Path } from '../provider/catalog/walk.js';
import { addressOf, childSpecsOf, manifestKind, manifestKinds, NAME_PATTERN } from './manifest/kinds.js';
import { refresh, type LiveResource } from './live/refresh.js';
import { ADOPTED, encodeMetadata } from './live/stamp.js';

type Doc = Record<string, any>;

export interface ExportResult {
  yaml: string;
  count: number;
  adopted: number;
  notes: string[];
}

const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .replace(/-+$/, '')
    .slice(0, 64);

function baseName(l: LiveResource, stack: string): string {
  if (l.stamp?.stack === stack && l.stamp.name) return l.stamp.name.slice(l.entry.kind.length + 1);
  const key = l.entry.naturalKey ? [l.read[l.entry.naturalKey]].flat()[0] : undefined;
  const candidates = [l.read.name, key, l.read.description].filter((v): v is string => typeof v === 'string' && v !== '').map(slug);
  return candidates.find((c) => NAME_PATTERN.test(c)) ?? `${l.entry.type.replace(/_/g, '-')}-${l.id.slice(l.entry.prefix.length + 1, l.entry.prefix.length + 11).toLowerCase()}`;
}

/** Fields equal to their default are left out, so exported manifests read like written ones. */
function withoutDefaults(entry: KindEntry, body: Doc): Doc {
  const out: Doc = {};
  for (const [k, v] of Object.entries(body)) {
    const schema = entry.fields[k];
    const d = schema?.safeParse(undefined);
    if (d?.success && isDeepStrictEqual(d.data ?? null, v ?? null)) continue;
    out[k] = v;
  }
  return out;
}

/** Puts `${env:NAME}` where the create schema requires a write-only value the API never returns. */
function placeholders(entry: KindEntry, body: Doc, address: string, needed: string[]): Doc {
  const r = entry.create.safeParse(body);
  if (r.success) return body;
  const root = z.object(entry.fields);
  const out = structuredClone(body);
  for (const issue of r.error.issues) {
    const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol') as Path;
    const schema = schemaAt(root, path);
    if (!schema || !traitsOf(schema).writeOnly) continue;
    const name = `EDGEFORM_SECRET_${`${address}_${pathText(path)}`.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/_+$/, '')}`;
    let cur = out;
    for (const p of path.slice(0, -1)) cur = cur[p] ??= {};
    cur[path[path.length - 1]] = `\${env:${name}}`;
    needed.push(name);
  }
  return out;
}

export async function exportManifests(client: ApiClient, opts: { stack: string; kinds: string[]; adopt: boolean }): Promise<ExportResult> {
  const kinds = opts.kinds.length ? opts.kinds.map((k) => manifestKind(k)!) : [...manifestKinds];
  const live = await refresh(client, kinds);
  const notes: string[] = [];
  const chosen: LiveResource[] = [];
  const names = new Map<string, string>();
  const taken = new Set<string>();
  for (const entry of kinds) {
    for (const l of [...(live.byKind.get(entry.kind) ?? [])].reverse()) {
      if (l.stamp && l.stamp.stack !== opts.stack) {
        notes.push(`${l.id} is managed by stack "${l.stamp.stack}" (as ${l.stamp.name}); export it from there`);
        continue;
      }
      let name = baseName(l, opts.stack);
      for (let n = 2; taken.has(addressOf(entry.kind, name)); n++) name = `${baseName(l, opts.stack).slice(0, 120)}-${n}`;
      taken.add(addressOf(entry.kind, name));
      names.set(l.id, addressOf(entry.kind, name));
      chosen.push(l);
    }
  }
  const toRef = (v: string) => names.get(v) ?? v;
  const docs: string[] = [];
  let adopted = 0;
  for (const l of chosen) {
    const address = names.get(l.id)!;
    const needed: string[] = [];
    const input = placeholders(l.entry, liveInput(l.entry, l.read), address, needed);
    const body = withoutDefaults(l.entry, mapRefs(l.entry.fields, input, toRef));
    if ('metadata' in l.entry.fields) {
      if (l.userMetadata) body.metadata = l.userMetadata;
      else delete body.metadata;
    }
    delete body.name;
    const doc: Doc = { kind: l.entry.kind, name: address.slice(l.entry.kind.length + 1) };
    const stampable = 'metadata' in l.entry.fields;
    // Without a stamp the document is bound by id; with --adopt the stamp identifies it.
    if (stampable && !opts.adopt && l.stamp?.stack !== opts.stack) doc.id = l.id;
    Object.assign(doc, body);
    for (const spec of childSpecsOf(l.entry.kind)) {
      const kids = l.children[spec.key] ?? [];
      if (!kids.length) continue;
      doc[spec.key] = kids.map((k, i) => {
        const withSecrets = placeholders(spec.entry, liveInput(spec.entry, k.read), `${address}_${spec.key}_${i}`, needed);
        delete withSecrets[spec.parentField];
        const child = withoutDefaults(spec.entry, mapRefs(spec.entry.fields, withSecrets, toRef));
        if (k.userMetadata) child.metadata = k.userMetadata;
        else delete child.metadata;
        return child;
      });
    }
    const header = needed.length ? needed.map((n) => `# ${n}: a write-only value the API never returns; set it before plan or apply\n`).join('') : '';
    docs.push(`${header}${stringify(doc, { lineWidth: 0 })}`);
    if (opts.adopt && stampable && l.stamp?.stack !== opts.stack) {
      await client.update(l.entry, l.id, { metadata: encodeMetadata(l.userMetadata, { stack: opts.stack, name: address, s: ADOPTED }) });
      adopted++;
    }
  }
  return { yaml: docs.join('---\n'), count: docs.length, adopted, notes };
}
