// The provider schema in its two wire forms: the protocol's Schema messages (for
// GetProviderSchema) and the JSON of `terraform providers schema -json` (for the CDKTF
// generator and for comparing with what terraform itself reports).
import { typeJson } from './cty.js';
import { dataSourceTypes } from './data-source.js';
import { PROVIDER_SOURCE, providerNode, resourceTypes, type ObjectNode } from './schema.js';

export const PROVIDER_ADDRESS = `registry.terraform.io/${PROVIDER_SOURCE}`;

/** A block; `description` is the resource's summary or the nested block's own, for docs and editors' hover text. */
export function protoBlock(node: ObjectNode, description = ''): object {
  return {
    version: 0,
    description,
    attributes: node.attributes.map((a) => ({
      name: a.name,
      type: typeJson(a.type),
      description: a.description,
      required: a.required,
      optional: a.optional,
      computed: a.computed,
      sensitive: a.sensitive,
      write_only: Boolean(a.writeOnlyOf),
    })),
    block_types: node.blocks.map((b) => ({
      type_name: b.name,
      block: protoBlock(b.block, b.description),
      nesting: b.nesting === 'single' ? 'SINGLE' : 'LIST',
      min_items: b.minItems,
      max_items: b.maxItems,
    })),
  };
}

const dataSummary = (summary: string, lookups: string[]) => `Looks up one: ${summary} Set ${lookups.join(', ')} (or several) to pick it.`;

export function protoSchemas() {
  return {
    provider: { version: 0, block: protoBlock(providerNode) },
    resource_schemas: Object.fromEntries(resourceTypes.map((r) => [r.typeName, { version: 0, block: protoBlock(r.node, r.kind.summary) }])),
    data_source_schemas: Object.fromEntries(dataSourceTypes.map((d) => [d.typeName, { version: 0, block: protoBlock(d.node, dataSummary(d.kind.summary, d.lookups)) }])),
  };
}

const sortedKeys = <T>(entries: [string, T][]) => Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** A block as `terraform providers schema -json` prints it (false flags and empty maps left out). */
export function jsonBlock(node: ObjectNode, description = ''): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (node.attributes.length) {
    out.attributes = sortedKeys(node.attributes.map((a) => [a.name, {
      type: a.type,
      ...(a.description ? { description: a.description } : {}),
      description_kind: 'plain',
      ...(a.required ? { required: true } : {}),
      ...(a.optional ? { optional: true } : {}),
      ...(a.computed ? { computed: true } : {}),
      ...(a.sensitive ? { sensitive: true } : {}),
      ...(a.writeOnlyOf ? { write_only: true } : {}),
    }]));
  }
  if (node.blocks.length) {
    out.block_types = sortedKeys(node.blocks.map((b) => [b.name, {
      nesting_mode: b.nesting,
      block: jsonBlock(b.block, b.description),
      ...(b.minItems ? { min_items: b.minItems } : {}),
      ...(b.maxItems ? { max_items: b.maxItems } : {}),
    }]));
  }
  if (description) out.description = description;
  out.description_kind = 'plain';
  return out;
}

/** The same document `terraform providers schema -json` prints for this provider. */
export function providerSchemaJson() {
  return {
    format_version: '1.0',
    provider_schemas: {
      [PROVIDER_ADDRESS]: {
        provider: { version: 0, block: jsonBlock(providerNode) },
        resource_schemas: sortedKeys(resourceTypes.map((r) => [r.typeName, { version: 0, block: jsonBlock(r.node, r.kind.summary) }])),
        data_source_schemas: sortedKeys(dataSourceTypes.map((d) => [d.typeName, { version: 0, block: jsonBlock(d.node, dataSummary(d.kind.summary, d.lookups)) }])),
      },
    },
  };
}
