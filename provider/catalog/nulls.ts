// Shared by the API's input parsing and the manifests (YAML's `description:` left empty is null).
// `null` for an optional field that has no null value of its own means "no value", as
// SPEC's conventions say of responses ("fields with no value may be null or absent").
// Clients send it that way too: generated clients serialise unset optionals as null, and a
// read form sent back (an ed25519 SSH CA's `elliptic_curve: null`, an OAuth member's
// `client_id: null`) carries them. Dropping those keys before validation makes null and
// absent mean the same on input, so the default applies. A required field's null is
// still refused, and fields whose null means something (a module, an OAuth member) keep it.
import type { z } from 'zod';
import { defOf, fieldOf, shapeOf, unwrap } from './traits.js';

type Doc = Record<string, unknown>;

const accepts = (schema: z.ZodType, value: unknown) => schema.safeParse(value).success;

function elementOf(schema: z.ZodType): z.ZodType | undefined {
  const d = defOf(unwrap(schema)) as unknown as { type: string; element?: z.ZodType };
  return d.type === 'array' ? d.element : undefined;
}

/** A copy of `input` without the null values of optional fields that do not take null. */
export function nullsAsAbsent(schema: z.ZodType, input: unknown): unknown {
  if (Array.isArray(input)) {
    const el = elementOf(schema);
    return el ? input.map((v) => nullsAsAbsent(el, v)) : input;
  }
  const shape = shapeOf(schema);
  if (!shape || input === null || typeof input !== 'object') return input;
  const out: Doc = {};
  for (const [key, value] of Object.entries(input as Doc)) {
    const field = fieldOf(shape, key);
    if (!field) { out[key] = value; continue; }
    if (value === null && !accepts(field, null) && accepts(field, undefined)) continue;
    out[key] = nullsAsAbsent(field, value);
  }
  return out;
}
