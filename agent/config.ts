// The agent's settings: flags, then EDGEFORM_* variables, then the YAML file (--config).
// A tunnel is labeled (labels + forwards_to) or ephemeral (proto + an address).
import fs from 'node:fs';
import { isIPv4 } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { PROTOS, tunnelConfig, type TunnelConfig } from './protocol.js';

export interface AgentConfig {
  apiUrl: string;
  authtoken: string;
  metadata: string;
  updateCheck: boolean;
  stateDir: string;
  tunnels: TunnelConfig[];
}

export interface AgentFlags {
  apiUrl?: string;
  authtoken?: string;
  label?: string[];
  forwardsTo?: string;
  metadata?: string;
  config?: string;
  updateCheck?: boolean;
  stateDir?: string;
  /** The command-line endpoint's URL (its hostname; an internal TCP one's port too). */
  url?: string;
  /** `public` or `internal` (issue 36). */
  binding?: string;
  poolingEnabled?: boolean;
}

/** A problem with the settings: exit 2 with this sentence. */
export class ConfigError extends Error {}

const fileTunnel = z.strictObject({
  labels: z.union([z.record(z.string(), z.string()), z.array(z.string())]).optional(),
  proto: z.enum(PROTOS).optional(),
  addr: z.union([z.string(), z.number()]).optional(),
  forwards_to: z.string().optional(),
  hostname: z.string().optional(),
  /** Issue 36: the endpoint's URL (instead of hostname), its binding and pooling. */
  url: z.string().optional(),
  binding: z.enum(['public', 'internal']).optional(),
  pooling_enabled: z.boolean().optional(),
  metadata: z.string().optional(),
});

const fileSchema = z.strictObject({
  version: z.union([z.string(), z.number()]).optional(),
  api_url: z.string().optional(),
  authtoken: z.string().optional(),
  metadata: z.string().optional(),
  update_check: z.boolean().optional(),
  state_dir: z.string().optional(),
  tunnels: z.record(z.string(), fileTunnel).optional(),
});

/** `k=v` pairs into a map; a malformed one is a usage error. */
export function parseLabels(pairs: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of pairs) {
    const i = p.indexOf('=');
    if (i <= 0) throw new ConfigError(`--label ${JSON.stringify(p)} is not key=value`);
    out[p.slice(0, i)] = p.slice(i + 1);
  }
  return out;
}

/** What an ephemeral tunnel forwards to: `3000` is localhost:3000; http(s) tunnels get a URL. */
export function upstreamOf(proto: string, addr: string | number): string {
  const a = String(addr);
  if (/^[a-z]+:\/\//i.test(a)) return a;
  const hostport = /^\d+$/.test(a) ? `localhost:${a}` : a;
  return proto === 'http' || proto === 'https' ? `http://${hostport}` : hostport;
}

/**
 * A labeled tunnel's forwards_to as the agent will dial it: a bare port is localhost's, as for
 * an ephemeral tunnel (dialled as a host, `3000` is the IPv4 address 0.0.11.184). A host the
 * resolver would read as an IPv4 address in another form than a dotted quad (`3000:80`,
 * `0x7f.1:80`, `127.1:80`) is refused: nothing leaves for an address the user did not write.
 */
export function forwardsTarget(value: string, where: string): string {
  const v = value.trim();
  if (/^\d+$/.test(v)) return `localhost:${v}`;
  const rest = v.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/[/?#].*$/, '').replace(/^[^@]*@/, '');
  const host = rest.startsWith('[') ? rest.slice(1, rest.indexOf(']')) : rest.replace(/:\d*$/, '');
  if (!host) throw new ConfigError(`${where}: forwards_to ${JSON.stringify(value)} names no host: write host:port (e.g. localhost:3000) or a bare port`);
  if (/^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+))*$/i.test(host) && !isIPv4(host)) {
    throw new ConfigError(`${where}: forwards_to ${JSON.stringify(value)}: ${JSON.stringify(host)} is no host name, and as an address it would be dialled as one you did not write: write host:port (e.g. localhost:3000) or a bare port (3000 means localhost:3000)`);
  }
  return v;
}

/**
 * An endpoint's URL, binding and pooling as the tunnel's fields: the hostname (and an internal
 * TCP endpoint's port) from the URL, whose scheme must be the tunnel's.
 */
export function endpointFields(proto: string, e: { url?: string; hostname?: string; binding?: string; pooling_enabled?: boolean }, where: string): Record<string, unknown> {
  const out: Record<string, unknown> = { proto, hostname: e.hostname };
  if (e.url) {
    if (e.hostname) throw new ConfigError(`${where}: give url or hostname, not both`);
    const m = /^([a-z]+):\/\/([^/:?#]+)(?::(\d{1,5}))?\/?$/i.exec(e.url.trim());
    if (!m) throw new ConfigError(`${where}: url ${JSON.stringify(e.url)} is not scheme://host[:port] (e.g. https://api.internal, tcp://db.internal:5432)`);
    const scheme = m[1].toLowerCase();
    // An http tunnel may take an https URL and the other way round (its scheme is the endpoint's), as the service's agent does.
    const web = (p: string) => p === 'http' || p === 'https';
    if (scheme !== proto && !(web(scheme) && web(proto))) throw new ConfigError(`${where}: url ${JSON.stringify(e.url)} is not a ${proto} URL`);
    out.proto = scheme;
    out.hostname = m[2].toLowerCase();
    if (m[3] !== undefined) {
      if (proto !== 'tcp') throw new ConfigError(`${where}: url ${JSON.stringify(e.url)}: only a tcp URL names a port (the ingress's listeners give http, https and tls theirs)`);
      out.port = Number(m[3]);
    }
  }
  if (e.binding !== undefined) {
    if (e.binding !== 'public' && e.binding !== 'internal') throw new ConfigError(`${where}: binding ${JSON.stringify(e.binding)} is not public or internal`);
    out.bindings = [e.binding];
  }
  if (e.pooling_enabled) out.pooling_enabled = true;
  return out;
}

function checked(t: Record<string, unknown>, where: string): TunnelConfig {
  const r = tunnelConfig.safeParse(t);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new ConfigError(`${where}: ${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`);
  }
  return r.data;
}

export function resolveAgentConfig(flags: AgentFlags, ephemeral: { proto?: string; addr?: string }, env: NodeJS.ProcessEnv = process.env): AgentConfig {
  let file: z.infer<typeof fileSchema> = {};
  if (flags.config) {
    let text: string;
    try {
      text = fs.readFileSync(flags.config, 'utf8');
    } catch (e) {
      throw new ConfigError(`cannot read --config ${flags.config}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    const r = fileSchema.safeParse(parseYaml(text) ?? {});
    if (!r.success) {
      const i = r.error.issues[0];
      throw new ConfigError(`${flags.config}: ${i.path.join('.') || '(top level)'}: ${i.message}`);
    }
    file = r.data;
  }
  const apiUrl = flags.apiUrl || env.EDGEFORM_API_URL || file.api_url || 'http://127.0.0.1:8080';
  try {
    const u = new URL(apiUrl);
    if (!/^https?:$/.test(u.protocol)) throw new Error();
  } catch {
    throw new ConfigError(`--api-url ${JSON.stringify(apiUrl)} is not an http(s) URL such as http://127.0.0.1:8080`);
  }
  const authtoken = flags.authtoken || env.EDGEFORM_AUTHTOKEN || file.authtoken;
  if (!authtoken) throw new ConfigError('no authtoken: pass --authtoken TOKEN or set EDGEFORM_AUTHTOKEN (the token of a credential: POST /credentials)');
  // --metadata is the session's, and the command-line tunnels' (their configuration is the command line).
  const metadata = flags.metadata ?? file.metadata ?? '';
  if (Buffer.byteLength(metadata) > 4096) throw new ConfigError('--metadata is over 4096 bytes');
  const cliMetadata = flags.metadata ?? '';
  const tunnels: TunnelConfig[] = [];
  for (const [name, t] of Object.entries(file.tunnels ?? {})) {
    const where = `${flags.config}: tunnels.${name}`;
    if (t.proto) {
      if (t.addr === undefined && !t.forwards_to) throw new ConfigError(`${where}: an ephemeral tunnel needs addr (a port or host:port)`);
      tunnels.push(checked({ name, proto: t.proto, ...endpointFields(t.proto, t, where), forwards_to: t.forwards_to ?? upstreamOf(t.proto, t.addr!), metadata: t.metadata ?? '' }, where));
    } else {
      if (t.url || t.binding || t.pooling_enabled) throw new ConfigError(`${where}: url, binding and pooling_enabled are an endpoint's (a tunnel with a proto), not a labeled tunnel's`);
      const labels = Array.isArray(t.labels) ? parseLabels(t.labels) : t.labels;
      const forwards = t.forwards_to ?? (t.addr === undefined ? undefined : String(t.addr));
      if (!labels || !forwards) throw new ConfigError(`${where}: a tunnel has labels and forwards_to, or a proto (http, https, tcp, tls) and addr`);
      tunnels.push(checked({ name, labels, forwards_to: forwardsTarget(forwards, where), metadata: t.metadata ?? '' }, where));
    }
  }
  if (flags.label?.length) {
    if (!flags.forwardsTo) throw new ConfigError('--label needs --forwards-to host:port (where the tunnel\'s traffic goes)');
    tunnels.push(checked({ name: 'command-line', labels: parseLabels(flags.label), forwards_to: forwardsTarget(flags.forwardsTo, '--forwards-to'), metadata: cliMetadata }, 'command line'));
  } else if (flags.forwardsTo && !ephemeral.proto) {
    throw new ConfigError('--forwards-to needs at least one --label key=value');
  }
  if (ephemeral.proto) {
    if (!(PROTOS as readonly string[]).includes(ephemeral.proto)) throw new ConfigError(`unknown tunnel type ${JSON.stringify(ephemeral.proto)}; use http, https, tcp or tls`);
    if (!ephemeral.addr) throw new ConfigError(`edgeform agent ${ephemeral.proto} needs an address: a port (3000) or host:port`);
    tunnels.push(checked({ name: ephemeral.proto, proto: ephemeral.proto, ...endpointFields(ephemeral.proto, { url: flags.url, binding: flags.binding, pooling_enabled: flags.poolingEnabled }, 'command line'), forwards_to: upstreamOf(ephemeral.proto, ephemeral.addr), metadata: cliMetadata }, 'command line'));
  } else if (flags.url || flags.binding || flags.poolingEnabled) {
    throw new ConfigError('--url, --binding and --pooling-enabled are for an endpoint: give its type and address (edgeform agent http 3000 --url https://api.internal)');
  }
  if (!tunnels.length) throw new ConfigError('no tunnel to start: give --label k=v --forwards-to host:port, a type and address (http 3000), or --config FILE with tunnels');
  return {
    apiUrl: apiUrl.replace(/\/+$/, ''),
    authtoken,
    metadata,
    updateCheck: flags.updateCheck !== false && file.update_check !== false,
    stateDir: path.resolve(flags.stateDir || env.EDGEFORM_AGENT_STATE_DIR || file.state_dir || path.join(os.homedir(), '.edgeform', 'agent')),
    tunnels,
  };
}
