// The tfplugin6.Provider service: each RPC decodes its DynamicValues, asks resource.ts and
// answers in msgpack. Failures become diagnostics; nothing here is per kind.
import { ApiClient } from '../client/index.js';
import { decodeValue, encodeValue, isUnknown, parseStateJson } from './cty.js';
import { error, type Diagnostic } from './diagnostics.js';
import { dataSourceType, readDataSource, type DataSourceType } from './data-source.js';
import { applyChange, importState, planChange, readState, validateConfig } from './resource.js';
import { protoSchemas } from './schema-out.js';
import { providerNode, resourceType, type ResourceType } from './schema.js';

type Doc = Record<string, any>;
type DynamicValue = { msgpack?: Uint8Array | null; json?: Uint8Array | null } | null | undefined;

export interface ProviderOptions {
  version: string;
  env: NodeJS.ProcessEnv;
  log(line: string): void;
}

const dv = (value: unknown, rt: ResourceType) => ({ msgpack: encodeValue(value, rt.type) });
const read = (v: DynamicValue): Doc | null => decodeValue(v?.msgpack);
/** A route or rule data source needs its parent; the rest needs nothing in particular. */
function validateLookup(ds: DataSourceType, config: Doc | null): Diagnostic[] {
  if (ds.parent && config && config[ds.parent] == null) return [error(`Missing ${ds.parent}`, `${ds.typeName} lives under its parent: set ${ds.parent}.`)];
  return [];
}

const steps = (path: (string | number)[]) => ({ steps: path.map((p) => (typeof p === 'number' ? { element_key_int: p } : { attribute_name: p })) });

export function providerService(opts: ProviderOptions) {
  let client: ApiClient | undefined;

  const typed = <R extends { diagnostics?: Diagnostic[] }>(typeName: string, fn: (rt: ResourceType) => Promise<R> | R): Promise<R | { diagnostics: Diagnostic[] }> | R | { diagnostics: Diagnostic[] } => {
    const rt = resourceType(typeName);
    return rt ? fn(rt) : { diagnostics: [error(`Unknown resource type ${typeName}`, 'This provider version does not have it.')] };
  };
  const dataTyped = <R extends { diagnostics?: Diagnostic[] }>(typeName: string, fn: (ds: DataSourceType) => Promise<R> | R): Promise<R | { diagnostics: Diagnostic[] }> | R | { diagnostics: Diagnostic[] } => {
    const ds = dataSourceType(typeName);
    return ds ? fn(ds) : { diagnostics: [error(`Unknown data source ${typeName}`, 'This provider version does not have it.')] };
  };
  const needClient = (): ApiClient => {
    if (!client) throw new Error('the provider is not configured (ConfigureProvider was not called)');
    return client;
  };

  return {
    GetProviderSchema: () => ({
      ...protoSchemas(),
      diagnostics: [],
      server_capabilities: { get_provider_schema_optional: true },
    }),

    ValidateProviderConfig: () => ({ diagnostics: [] }),

    ConfigureProvider: (req: { terraform_version: string; config: DynamicValue }) => {
      const config = read(req.config) ?? {};
      // An empty value counts as unset (a variable defaulting to ""), so the environment applies.
      const pick = (name: string, env: string): string | undefined => (isUnknown(config[name]) ? undefined : config[name]) || opts.env[env] || undefined;
      const baseUrl = pick('api_url', 'EDGEFORM_API_URL');
      const apiKey = pick('api_key', 'EDGEFORM_API_KEY');
      const diagnostics: Diagnostic[] = [];
      if (!baseUrl) diagnostics.push(error('Missing api_url', 'Set api_url in the provider "edgeform" block or the EDGEFORM_API_URL environment variable, e.g. http://127.0.0.1:8080.'));
      if (!apiKey) diagnostics.push(error('Missing api_key', 'Set api_key in the provider "edgeform" block or the EDGEFORM_API_KEY environment variable to an API key\'s token.'));
      // Caught here once, not as "Invalid URL" against every resource.
      if (baseUrl && !/^https?:\/\/[^/]/i.test(baseUrl)) {
        diagnostics.push(error('Invalid api_url', `api_url must be an http:// or https:// URL such as http://127.0.0.1:8080, not "${baseUrl}".`, providerNode, config.api_url ? ['api_url'] : undefined));
      }
      if (!diagnostics.length) {
        client = new ApiClient({ baseUrl: baseUrl!, apiKey: apiKey!, userAgent: `terraform-provider-edgeform/${opts.version} terraform/${req.terraform_version}` });
      }
      return { diagnostics };
    },

    ValidateResourceConfig: (req: { type_name: string; config: DynamicValue }) =>
      typed(req.type_name, (rt) => ({ diagnostics: validateConfig(rt, read(req.config)) })),

    UpgradeResourceState: (req: { type_name: string; raw_state: { json?: Uint8Array | null } | null }) =>
      typed(req.type_name, (rt) => {
        const text = req.raw_state?.json ? Buffer.from(req.raw_state.json).toString('utf8') : 'null';
        // encodeValue conforms the stored object to the current schema (keys added or gone).
        return { upgraded_state: dv(parseStateJson(text), rt), diagnostics: [] };
      }),

    ReadResource: (req: { type_name: string; current_state: DynamicValue }) =>
      typed(req.type_name, async (rt) => {
        const prior = read(req.current_state);
        const r = await readState(needClient(), rt, prior);
        return { new_state: dv(r.state, rt), diagnostics: r.diagnostics };
      }),

    PlanResourceChange: (req: { type_name: string; prior_state: DynamicValue; proposed_new_state: DynamicValue; config: DynamicValue }) =>
      typed(req.type_name, (rt) => {
        const r = planChange(rt, read(req.prior_state), read(req.proposed_new_state), read(req.config));
        return { planned_state: dv(r.planned, rt), requires_replace: r.replace.map(steps), diagnostics: r.diagnostics };
      }),

    ApplyResourceChange: (req: { type_name: string; prior_state: DynamicValue; planned_state: DynamicValue; config: DynamicValue }) =>
      typed(req.type_name, async (rt) => {
        const r = await applyChange(needClient(), rt, read(req.prior_state), read(req.planned_state), read(req.config));
        return { new_state: dv(r.state, rt), diagnostics: r.diagnostics };
      }),

    ImportResourceState: (req: { type_name: string; id: string }) =>
      typed(req.type_name, async (rt) => {
        const r = await importState(needClient(), rt, req.id);
        return {
          imported_resources: r.state ? [{ type_name: rt.typeName, state: dv(r.state, rt) }] : [],
          diagnostics: r.diagnostics,
        };
      }),

    ValidateDataResourceConfig: (req: { type_name: string; config: DynamicValue }) =>
      dataTyped(req.type_name, (ds) => ({ diagnostics: validateLookup(ds, read(req.config)) })),

    ReadDataSource: (req: { type_name: string; config: DynamicValue }) =>
      dataTyped(req.type_name, async (ds) => {
        const r = await readDataSource(needClient(), ds, read(req.config));
        // A failed read still answers with the configuration, so terraform can show it.
        return { state: { msgpack: encodeValue(r.state ?? read(req.config), ds.type) }, diagnostics: r.diagnostics };
      }),

    StopProvider: () => {
      // Calls in flight finish (an interrupted apply must still record what it created).
      opts.log('StopProvider: finishing calls in flight');
      return { Error: '' };
    },
  };
}
