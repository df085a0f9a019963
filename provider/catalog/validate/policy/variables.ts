// The variables a policy's expressions may read, per phase, with their CEL types. One table
// serves the type checker (cel.ts), the engine that fills them (server/policy/context.ts)
// and docs/traffic-policy.md. Names and types are the service's (its traffic-policy docs),
// beside edgeform's earlier spellings (req.path, req.query), which keep working.
import type { Phase } from '../traffic-policy.js';

/**
 * A CEL type, or a nested group of variables (`req` holds `req.method`, ...). A group with a
 * `''` entry is also a value of that type: the service's `req.url` compares as the whole URL
 * and has `req.url.path`; see STRING_AND_OBJECT in cel.ts for how an expression reads it.
 */
export type VarTree = { [name: string]: string | VarTree };

const HEADERS = 'map<string, list<string>>';
const TS = 'google.protobuf.Timestamp';

/** A header value that the service also parses (`req.content_type` and `.parameters`). */
const CONTENT_TYPE: VarTree = { '': 'string', parameters: 'map<string, string>', raw: 'string' };

export const REQUEST_VARS: VarTree = {
  method: 'string',
  url: {
    '': 'string',
    authority: 'string',
    host: 'string',
    path: 'string',
    port: 'int',
    query: 'string',
    query_params: HEADERS,
    raw: 'string',
    raw_path: 'string',
    scheme: 'string',
    uri: 'string',
    user_password: 'string',
  },
  /** edgeform's earlier spellings: req.url.path, req.url.host, req.url.query_params. */
  path: 'string',
  host: 'string',
  query: HEADERS,
  query_params: HEADERS,
  headers: HEADERS,
  trailers: HEADERS,
  content_length: 'int',
  body_length: 'int',
  content_encoding: 'list<string>',
  content_type: CONTENT_TYPE,
  cookies: 'map<string, list<map<string, string>>>',
  location: 'string',
  user_agent: {
    '': 'string',
    name: 'string',
    version: 'string',
    os: 'string',
    os_version: 'string',
    device: 'string',
    is_mobile: 'bool',
    is_tablet: 'bool',
    is_desktop: 'bool',
    is_bot: 'bool',
    url: 'string',
  },
  version: 'string',
  ts: { header_received: TS, body_received: TS },
};

const NAME: VarTree = {
  '': 'string',
  common_name: 'string',
  country: 'list<string>',
  locality: 'list<string>',
  organization: 'list<string>',
  organizational_unit: 'list<string>',
  postal_code: 'list<string>',
  province: 'list<string>',
  street_address: 'list<string>',
};

/** A certificate of the TLS handshake (the client's when it sent one, the edge's own). */
const CERT: VarTree = {
  subject: NAME,
  issuer: NAME,
  san: { '': 'string', dns_names: 'list<string>', email_addresses: 'list<string>', ip_addresses: 'list<string>', uris: 'list<string>' },
  serial_number: 'string',
  signature_algorithm: 'string',
  pem: 'string',
  validity: { not_before: TS, not_after: TS },
  extensions: 'list<map<string, dyn>>',
};

export const CONN_VARS: VarTree = {
  /** A group with no fields here: the service's conn.client_ip.geo.* and .categories are refused naming the setting (GEO_PREFIXES). */
  client_ip: { '': 'string' },
  client_port: 'int',
  server_ip: 'string',
  server_port: 'int',
  server_region: 'string',
  bytes_in: 'int',
  bytes_out: 'int',
  ts: { start: TS },
  tls: {
    version: 'string',
    cipher_suite: 'string',
    sni: 'string',
    negotiated_alpn: 'string',
    session_resumed: 'bool',
    ja4_fingerprint: 'string',
    client: CERT,
    server: CERT,
  },
};

export const RESPONSE_VARS: VarTree = {
  status_code: 'int',
  headers: HEADERS,
  trailers: HEADERS,
  content_length: 'int',
  content_encoding: 'list<string>',
  content_type: CONTENT_TYPE,
  cookies: 'map<string, list<map<string, dyn>>>',
  location: 'string',
};

export const ENDPOINT_VARS: VarTree = { id: 'string', url: 'string', addr: 'string', host: 'string', port: 'int', protocol: 'string', scheme: 'string' };

/** What each action leaves for later rules, under `actions.service.` and `actions.ngrok.` (the values of its last run). */
const ERROR: VarTree = { code: 'string', message: 'string' };
export const ACTION_VARS: Record<string, VarTree> = {
  rate_limit: { bucket_key: 'string', limited: 'bool', error: ERROR },
  restrict_ips: { action: 'string', matched_cidr: 'string', error: ERROR },
  add_headers: { headers_added: 'map<string, string>' },
  remove_headers: { headers_removed: 'list<string>' },
  url_rewrite: { url: 'string' },
  redirect: { url: 'string' },
  custom_response: { status_code: 'int' },
  deny: { status_code: 'int' },
  basic_auth: { credentials: { presented: 'bool', username: 'string', authorized: 'bool' }, error: ERROR },
  jwt_validation: { tokens: 'list<map<string, dyn>>', error: ERROR },
  log: { metadata: 'map<string, dyn>' },
  verify_webhook: { verified: 'bool', error: ERROR },
  compress_response: { algorithm: 'string', error: ERROR },
  circuit_breaker: { tripped: 'bool', error: ERROR },
  request_body_find_replace: { replaced: 'int' },
  response_body_find_replace: { replaced: 'int' },
  close_connection: { closed: 'bool' },
  http_request: { res: { status_code: 'int', headers: HEADERS, body: 'string', url: 'string', duration: 'int' }, error: ERROR },
};

const HTTP = Object.keys(ACTION_VARS);
/** Action variables readable in a phase: those of the actions that may run there (or before it, for on_http_response). */
const ACTION_VARS_IN: Record<Phase, readonly string[]> = {
  on_http_request: HTTP.filter((a) => a !== 'compress_response' && a !== 'response_body_find_replace'),
  on_http_response: HTTP,
  on_tcp_connect: ['restrict_ips', 'log', 'close_connection', 'deny'],
};

/** The service's geography and IP-intelligence variables: refused at compile time here until the operator names a database (see docs/traffic-policy.md). */
export const GEO_PREFIXES = ['conn.geo', 'conn.ip_intel', 'conn.asn', 'conn.client_ip.geo', 'conn.client_ip.categories', 'conn.client_ip.is_', 'conn.client_ip.as'];

/** The top-level variables of a phase. */
export function variablesOf(phase: Phase): VarTree {
  const group = Object.fromEntries(ACTION_VARS_IN[phase].map((a) => [a, ACTION_VARS[a]]));
  // One set of action variables under two names: SPEC's and the service's.
  const actions: VarTree = { service: group, ngrok: group };
  const common: VarTree = { conn: CONN_VARS, endpoint: ENDPOINT_VARS, time: { now: TS }, actions, vars: 'map<string, dyn>' };
  if (phase === 'on_tcp_connect') return common;
  if (phase === 'on_http_request') return { req: REQUEST_VARS, ...common };
  return { req: REQUEST_VARS, res: RESPONSE_VARS, ...common };
}

/** Every variable of a phase as dotted names with their types (for messages and docs); a string-and-object group is listed once by its own name. */
export function flatVariables(tree: VarTree, prefix = ''): [string, string][] {
  return Object.entries(tree).flatMap(([k, v]) => {
    if (k === '') return [[prefix.slice(0, -1), v as string] as [string, string]];
    return typeof v === 'string' ? [[`${prefix}${k}`, v] as [string, string]] : flatVariables(v, `${prefix}${k}.`);
  });
}

/** The suffix of the hidden name that holds a string-and-object group's own value (`url$`: no expression can spell it). */
export const OWN_VALUE = '$';

/** The schema the CEL library is given: a string-and-object group becomes the group and a sibling `name$` of its own type. */
export function celSchema(tree: VarTree): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(tree)) {
    if (k === '') continue;
    if (typeof v === 'string') out[k] = v;
    else {
      out[k] = celSchema(v);
      if (typeof v[''] === 'string') out[k + OWN_VALUE] = v[''];
    }
  }
  return out;
}

const zero = (tree: VarTree): Record<string, unknown> =>
  Object.fromEntries(Object.entries(tree).map(([k, t]) => [k, typeof t !== 'string' ? zero(t) : t === 'bool' ? false : t === 'string' ? '' : t === 'int' ? 0n : t.startsWith('list') ? [] : {}]));
const ZERO = { service: zero(ACTION_VARS) };

/** The zero value of every action variable, as the engine starts a request with them (a fresh copy per call). */
export const zeroActionVars = (): Record<string, any> => structuredClone(ZERO);
