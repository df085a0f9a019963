// The variables a policy's expressions may read, per phase, with their CEL types. One table
// serves the type checker (cel.ts), the engine that fills them (server/policy/context.ts)
// and docs/traffic-policy.md.
import type { Phase } from '../traffic-policy.js';

/** A CEL type, or a nested group of variables (`req` holds `req.method`, ...). */
export type VarTree = { [name: string]: string | VarTree };

const HEADERS = 'map<string, list<string>>';

export const REQUEST_VARS: VarTree = {
  method: 'string',
  url: 'string',
  path: 'string',
  host: 'string',
  query: HEADERS,
  headers: HEADERS,
  content_length: 'int',
};

export const CONN_VARS: VarTree = { client_ip: 'string', server_port: 'int', tls: { version: 'string' } };

export const RESPONSE_VARS: VarTree = { status_code: 'int', headers: HEADERS };

/** What each action leaves for later rules, under `actions.service.` (the values of its last run). */
export const ACTION_VARS: Record<string, VarTree> = {
  rate_limit: { bucket_key: 'string', limited: 'bool', error: { code: 'string', message: 'string' } },
  restrict_ips: { action: 'string', matched_cidr: 'string' },
  add_headers: { headers_added: 'map<string, string>' },
  remove_headers: { headers_removed: 'list<string>' },
  url_rewrite: { url: 'string' },
};

/** Action variables readable in a phase: those of the actions that may run there. */
const ACTION_VARS_IN: Record<Phase, readonly string[]> = {
  on_http_request: ['rate_limit', 'restrict_ips', 'add_headers', 'remove_headers', 'url_rewrite'],
  on_http_response: ['rate_limit', 'restrict_ips', 'add_headers', 'remove_headers'],
  on_tcp_connect: ['restrict_ips'],
};

/** The top-level variables of a phase. */
export function variablesOf(phase: Phase): VarTree {
  const actions: VarTree = { service: Object.fromEntries(ACTION_VARS_IN[phase].map((a) => [a, ACTION_VARS[a]])) };
  const time: VarTree = { now: 'google.protobuf.Timestamp' };
  if (phase === 'on_tcp_connect') return { conn: CONN_VARS, time, actions };
  if (phase === 'on_http_request') return { req: REQUEST_VARS, conn: CONN_VARS, time, actions };
  return { req: REQUEST_VARS, res: RESPONSE_VARS, conn: CONN_VARS, time, actions };
}

/** Every variable of a phase as dotted names with their types (for messages and docs). */
export function flatVariables(tree: VarTree, prefix = ''): [string, string][] {
  return Object.entries(tree).flatMap(([k, v]) => (typeof v === 'string' ? [[`${prefix}${k}`, v] as [string, string]] : flatVariables(v, `${prefix}${k}.`)));
}

const zero = (tree: VarTree): Record<string, unknown> =>
  Object.fromEntries(Object.entries(tree).map(([k, t]) => [k, typeof t !== 'string' ? zero(t) : t === 'bool' ? false : t === 'string' ? '' : t.startsWith('list') ? [] : {}]));
const ZERO = { service: zero(ACTION_VARS) };

/** The zero value of every action variable, as the engine starts a request with them (a fresh copy per call). */
export const zeroActionVars = (): Record<string, any> => structuredClone(ZERO);
