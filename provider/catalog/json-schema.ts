// One way to turn catalog schemas into JSON Schema (draft 2020-12), shared by the OpenAPI
// document and the manifest schema so the two describe every field alike. `override` lets
// a consumer adjust each converted node (zod calls it once per schema, innermost first).
import { z } from 'zod';

export type JsonSchema = Record<string, any>;
export type JsonSchemaOverride = (ctx: { zodSchema: z.ZodType; jsonSchema: JsonSchema }) => void;

export function toJsonSchema(schema: z.ZodType, io: 'input' | 'output', override?: JsonSchemaOverride): JsonSchema {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    target: 'draft-2020-12',
    ...(override ? { override: override as never } : {}),
  }) as JsonSchema;
  return rest;
}
