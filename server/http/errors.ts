// Every API error code, in one registry: code -> status and what it means. docs/api.md is
// generated from this table and a test checks that every code the server emits is here.

export const ERRORS = {
  ERR_SERVICE_100: { status: 400, summary: 'The request body is not valid JSON, or not a JSON object.' },
  ERR_SERVICE_101: { status: 400, summary: 'The request body is not application/json.' },
  ERR_SERVICE_102: { status: 400, summary: 'The request body has a field the operation does not support.' },
  ERR_SERVICE_103: { status: 400, summary: 'A field has an invalid value.' },
  ERR_SERVICE_104: { status: 400, summary: 'The query has an unsupported parameter or an invalid value.' },
  ERR_SERVICE_105: { status: 400, summary: 'An id in the path does not belong to this collection (wrong prefix).' },
  ERR_SERVICE_106: { status: 400, summary: 'The field cannot be changed after creation.' },
  ERR_SERVICE_107: { status: 400, summary: 'A referenced resource does not exist.' },
  ERR_SERVICE_108: { status: 400, summary: 'An id in the body differs from the id in the path.' },
  ERR_SERVICE_109: { status: 400, summary: 'The request is not valid HTTP, or its path cannot be read (bad percent-encoding, a segment over 100 characters).' },
  // The agent gateway (server/gateway): what an agent is told when its hello or a bind is refused.
  ERR_SERVICE_110: { status: 400, summary: 'The agent\'s hello is malformed (see docs/agents.md for its shape).' },
  ERR_SERVICE_114: { status: 400, summary: 'This operation cannot be part of a batch (POST /_edgeform/batch): only creates, updates and deletes of resources and their modules can; send it as a request of its own.' },
  ERR_SERVICE_120: { status: 400, summary: 'A TLS edge has mutual_tls while its tls_termination.terminate_at is agent or upstream: only the edge checks client certificates, so the protection would be enforced nowhere. Terminate at the edge, or remove mutual_tls.' },
  ERR_SERVICE_111: { status: 413, summary: 'An agent control message is larger than 256 KiB.' },
  ERR_SERVICE_112: { status: 400, summary: 'An agent (version-2 protocol) asked for something on its endpoint that this server does not provide there, such as a protection (basic auth, OAuth, IP restriction...) or a TCP endpoint; the bind is refused rather than published without it (docs/agents.md).' },
  ERR_SERVICE_113: { status: 403, summary: 'The agent session was stopped (POST /tunnel_sessions/{id}/stop): its agent\'s reconnects are refused.' },
  ERR_SERVICE_201: { status: 401, summary: 'The Authorization header is missing or is not a Bearer token.' },
  ERR_SERVICE_202: { status: 401, summary: 'The bearer token is not valid.' },
  ERR_SERVICE_203: { status: 401, summary: 'The key belongs to an inactive bot user.' },
  ERR_SERVICE_211: { status: 403, summary: 'The caller is not allowed to do this.' },
  ERR_SERVICE_212: { status: 403, summary: 'The credential\'s acl does not allow binding this tunnel.' },
  ERR_SERVICE_217: { status: 400, summary: 'The Service-Version header has an unsupported value.' },
  ERR_SERVICE_218: { status: 400, summary: 'The Service-Version header is missing.' },
  ERR_SERVICE_226: { status: 429, summary: 'Too many requests for this API key; retry after Retry-After seconds.' },
  ERR_SERVICE_227: { status: 429, summary: 'Too many failed authentications from this client address; retry after Retry-After seconds.' },
  ERR_SERVICE_229: { status: 400, summary: 'The request counts as more requests against the API rate limit than a key may make in a whole window (`--api-rate-limit`, default 600 a minute): a batch of n operations counts n / 10, rounded up (POST /_edgeform/batch); send fewer operations at once.' },
  ERR_SERVICE_228: { status: 429, summary: 'Too many secret fingerprints asked for with this API key (POST /_edgeform/fingerprints); retry after Retry-After seconds.' },
  ERR_SERVICE_300: { status: 404, summary: 'No resource has this id.' },
  ERR_SERVICE_301: { status: 404, summary: 'No such path.' },
  ERR_SERVICE_302: { status: 404, summary: 'The module is not set on this resource.' },
  ERR_SERVICE_304: { status: 404, summary: 'The stack is not locked: no lock was taken, it was released, or its lease expired (stack locks, an edgeform extension).' },
  ERR_SERVICE_310: { status: 405, summary: 'The method is not allowed on this path.' },
  ERR_SERVICE_315: { status: 417, summary: 'The Expect header names an expectation the server does not support (only 100-continue).' },
  ERR_SERVICE_320: { status: 409, summary: 'A unique value is already taken.' },
  ERR_SERVICE_321: { status: 409, summary: 'The resource is still referenced and cannot be deleted.' },
  ERR_SERVICE_362: { status: 409, summary: 'The endpoint is an agent endpoint (type agent): its agent made it and it goes when the agent does; it cannot be changed or deleted through the API (stop the agent or its session instead).' },
  // SPEC's four reasons an agent update fails, one code each (DECISIONS: "a code per reason").
  ERR_SERVICE_322: { status: 409, summary: 'The agent cannot update: no update is available.' },
  ERR_SERVICE_323: { status: 409, summary: 'The agent cannot update: its configuration disables update checks.' },
  ERR_SERVICE_324: { status: 409, summary: 'The agent cannot update: it is already updating.' },
  ERR_SERVICE_325: { status: 409, summary: 'The agent cannot update: it has updated and must restart first.' },
  ERR_SERVICE_327: { status: 409, summary: 'The last API key of the admin user cannot be deleted.' },
  ERR_SERVICE_328: { status: 409, summary: 'The stack is locked by another run (or the lock id is not the holder\'s); details.lock names the holder (stack locks, an edgeform extension).' },
  ERR_SERVICE_326: { status: 409, summary: 'The session already has a tunnel with the same labels.' },
  ERR_SERVICE_332: { status: 409, summary: 'The agent cannot carry out the command: its application registered no handler for it, it is too old to know it, or it refused it (msg names the reason).' },
  ERR_SERVICE_329: { status: 409, summary: 'The agent cannot restart: its platform (Windows) has no exec.' },
  ERR_SERVICE_330: { status: 413, summary: 'The request body is larger than 1 MiB.' },
  ERR_SERVICE_331: { status: 431, summary: 'The request headers are larger than 16 KiB.' },
  // The ingress's HTTP side (server/ingress/http, backends, modules; docs/ingress.md): the
  // page a client of an edge gets carries the code in `edgeform-error-code`.
  ERR_SERVICE_740: { status: 404, summary: 'No HTTPS edge serves this host name on this port.' },
  ERR_SERVICE_741: { status: 404, summary: 'No route of the edge matches the request\'s host and path.' },
  ERR_SERVICE_742: { status: 502, summary: 'No online tunnel of any instance has the labels the tunnel-group backend asks for; start `edgeform agent` with those labels.' },
  ERR_SERVICE_743: { status: 502, summary: 'The upstream refused the connection or failed before answering (the agent could not reach its forwards_to).' },
  ERR_SERVICE_744: { status: 504, summary: 'The upstream did not answer in time.' },
  ERR_SERVICE_745: { status: 502, summary: 'The route has no enabled backend, or its backend no longer exists.' },
  ERR_SERVICE_746: { status: 502, summary: 'The weighted backend has no child backend with a weight above 0 (or its children nest in a loop).' },
  ERR_SERVICE_747: { status: 503, summary: 'The route\'s circuit breaker is open after too many upstream errors; retry after Retry-After seconds.' },
  ERR_SERVICE_748: { status: 413, summary: 'The request body is larger than the edge reads for this route.' },
  ERR_SERVICE_749: { status: 502, summary: 'The edge could not handle the request (a fault of the server, logged with the request).' },
  ERR_SERVICE_750: { status: 502, summary: 'The backend cannot carry a WebSocket or TCP stream (an http_response backend).' },
  ERR_SERVICE_760: { status: 502, summary: 'No rule of the cloud endpoint\'s traffic policy ended the request (the service\'s answer to a non-terminating cloud endpoint policy; the API refuses such a policy, so an expression that failed to evaluate is the usual cause).' },
  ERR_SERVICE_761: { status: 502, summary: 'A forward-internal action (with on_error: halt) named an internal endpoint URL that no cloud endpoint and no online agent has (deleted, never made, or its agent gone).' },
  ERR_SERVICE_762: { status: 502, summary: 'A request passed through 8 internal endpoints by forward-internal without an answer: the policies forward in a loop.' },
  ERR_SERVICE_840: { status: 403, summary: 'The credential already holds as many agent sessions as the server allows per credential (--agent-max-sessions-per-credential); stop one of its agents, or start this one with another credential.' },
  ERR_SERVICE_752: { status: 503, summary: 'The agent\'s connection is still closing the many requests this client address (100 at most) or all its clients (1,000) cancelled, at the pace its HTTP/2 server accepts (about 25 a second); retry in a few seconds.' },
  // The ingress's route modules (server/ingress/modules, docs/ingress.md): refusals at the edge.
  ERR_SERVICE_780: { status: 403, summary: 'The client address is not allowed by the route\'s IP restriction (or the TCP/TLS edge\'s).' },
  ERR_SERVICE_781: { status: 403, summary: 'The request\'s User-Agent is not allowed by the route\'s user agent filter.' },
  ERR_SERVICE_782: { status: 403, summary: 'The webhook request has no valid signature from the route\'s provider (missing header, wrong secret or altered body).' },
  ERR_SERVICE_783: { status: 403, summary: 'The webhook request\'s signed timestamp is outside the provider\'s tolerance (a replay, or a clock far off).' },
  ERR_SERVICE_788: { status: 401, summary: 'The request carries no username and password that the agent\'s endpoint accepts (its basic auth); the answer has WWW-Authenticate: Basic.' },
  ERR_SERVICE_786: { status: 401, summary: 'The webhook request has no valid signature from the route\'s provider, which expects 401 for it (Xero\'s intent to receive).' },
  ERR_SERVICE_753: { status: 400, summary: 'The request asks to upgrade to h2c (HTTP/2 in the clear), which an edge never passes to its upstream: the upstream would take every later request on the connection past the edge\'s routes and modules. Over TLS, HTTP/2 is chosen by ALPN (h2).' },
  ERR_SERVICE_751: { status: 400, summary: 'The WebSocket handshake is malformed (Sec-WebSocket-Key of 16 bytes and Sec-WebSocket-Version: 13 are required).' },
  // Sign-in at the edge (server/ingress/auth, docs/ingress.md "Sign-in at the edge").
  ERR_SERVICE_800: { status: 401, summary: 'The route requires sign-in and the request carries no valid session; only GET and HEAD are sent to sign in, so sign in with a browser first.' },
  ERR_SERVICE_801: { status: 403, summary: 'The sign-in callback was refused: no sign-in was started from this browser, it took over 10 minutes, or its state does not match (a forged or replayed callback). Start again from the page you wanted.' },
  ERR_SERVICE_802: { status: 403, summary: 'The identity provider\'s answer did not verify (code, ID token signature, issuer, audience, nonce or expiry), or it reported an error; the sign-in was refused.' },
  ERR_SERVICE_803: { status: 502, summary: 'The identity provider could not be reached, or answered too slowly or with something other than its documented endpoints; try again later.' },
  ERR_SERVICE_804: { status: 403, summary: 'The signed-in user is not allowed by the route (email_addresses, email_domains, organizations or teams).' },
  ERR_SERVICE_805: { status: 501, summary: 'The OAuth route has no client_id and this server has no managed app for its provider; set the route\'s client_id and client_secret, or configure the managed app (docs/ingress.md). The backend was not reached.' },
  // OAuth at the edge (server/ingress/auth/oauth*.ts, docs/ingress.md "oauth").
  ERR_SERVICE_820: { status: 502, summary: 'A server setting of the OAuth route\'s provider (`EDGEFORM_OAUTH_<PROVIDER>_URL`, `_TOKEN_URL` or `_API_URL`) is not an https URL (plain http only on a loopback address); the server\'s operator must correct it. The backend was not reached.' },
  // SAML sign-in at the edge (server/ingress/auth/saml.ts) and its SP endpoints (server/http/saml-endpoints.ts).
  ERR_SERVICE_806: { status: 400, summary: 'The SAML response could not be read: no SAMLResponse, not base64, not XML (or a DOCTYPE), or no assertion, ID or NameID. The sign-in was refused.' },
  ERR_SERVICE_807: { status: 403, summary: 'The SAML assertion is not signed by the route\'s identity provider (unsigned, altered, signed with another key, or issued by another entity); the sign-in was refused.' },
  ERR_SERVICE_808: { status: 403, summary: 'The SAML assertion\'s audience is not the route\'s entity_id (an assertion for another service provider); the sign-in was refused.' },
  ERR_SERVICE_809: { status: 403, summary: 'The SAML assertion is outside its validity window (NotBefore/NotOnOrAfter, with 60 s of clock skew, or issued over an hour ago); the sign-in was refused.' },
  ERR_SERVICE_810: { status: 403, summary: 'The SAML assertion (or the edge\'s ticket made from it) was already used to sign in: a replayed response. Start again from the page you wanted.' },
  ERR_SERVICE_811: { status: 403, summary: 'The identity provider started the sign-in itself (no InResponseTo) and the route\'s allow_idp_initiated is false.' },
  ERR_SERVICE_812: { status: 403, summary: 'The signed-in user is in none of the SAML route\'s authorized_groups (read from the assertion\'s group attribute, docs/ingress.md).' },
  ERR_SERVICE_813: { status: 403, summary: 'The SAML assertion\'s NameID is missing or not in the route\'s nameid_format.' },
  ERR_SERVICE_814: { status: 403, summary: 'The identity provider answered with a SAML error status (the user was not authenticated there); the sign-in was refused.' },
  ERR_SERVICE_815: { status: 503, summary: 'The edge remembers the maximum number of recent SAML assertions (to refuse replays) and accepts no new one until some expire; retry in a few minutes.' },
  ERR_SERVICE_816: { status: 404, summary: 'No HTTPS edge route with this id has a SAML module (the path is a SAML metadata, ACS or SLO URL).' },
  ERR_SERVICE_818: { status: 400, summary: 'The SAMLResponse is over the edge\'s bounds on SAML documents (bytes, nesting depth, elements, attributes, namespace declarations, Signature, Reference or Transform elements; docs/ingress.md), so it was not parsed; the sign-in was refused.' },
  ERR_SERVICE_819: { status: 503, summary: 'The edge could not verify the SAMLResponse in time (within 5 s of receiving it, or with too many others waiting); the sign-in was refused. Try again.' },
  ERR_SERVICE_817: { status: 502, summary: 'The route\'s SAML sign-in cannot start: idp_metadata has no HTTP-Redirect SingleSignOnService or no signing certificate, or the route has no request-signing key. The backend was not reached.' },
  // The ingress's listeners and edges (server/ingress, docs/ingress.md).
  ERR_SERVICE_700: { status: 409, summary: 'The hostport\'s port is held by a TCP edge, or a TCP edge asks for a port other edges hold: a TCP edge takes its public port whole (HTTPS and TLS edges share a port by name).' },
  ERR_SERVICE_702: { status: 400, summary: 'The request to an edge is not valid HTTP.' },
  ERR_SERVICE_703: { status: 431, summary: 'The request line and headers sent to an edge are larger than 16 KiB (HTTP/1.1 and HTTP/2); the connection is closed after the answer on HTTP/1.1.' },
  ERR_SERVICE_704: { status: 408, summary: 'The request headers did not reach the edge within the header timeout (10 s).' },
  ERR_SERVICE_705: { status: 400, summary: 'A plain HTTP request reached an ingress listener that speaks TLS (its edges are HTTPS or TLS); send it with https:// (or to the plain-HTTP listener of `--ingress-http`).' },
  ERR_SERVICE_754: { status: 500, summary: 'The edge failed while choosing the route or backend for the request (a fault of the server, logged with the request).' },
  ERR_SERVICE_845: { status: 414, summary: 'The request target (path and query) sent to an edge is longer than 8 KiB; the connection is closed after the answer on HTTP/1.1.' },
  ERR_SERVICE_860: { status: 400, summary: 'The request\'s Host (or :authority) is not a host name with an optional port, or its port is not the public port of the listener it reached (for example `app.example.com:x@evil.example`).' },
  ERR_SERVICE_864: { status: 400, summary: 'The request path is ambiguous: a backslash, an escaped slash or backslash (%2F, %5C), an escaped control character, a bad %-escape, a dot segment with ; parameters, or a spelling (case, ; parameters, a trailing slash) that upstreams may read as the path of a more specific route than the one it matches.' },
  ERR_SERVICE_846: { status: 429, summary: 'The client address already has as many requests and streams in flight through agents as the server allows one address (`--ingress-relays-per-client`, default 128; an IPv6 /64 counts as one address); retry after Retry-After seconds, when some have finished.' },
  ERR_SERVICE_861: { status: 408, summary: 'The request body stalled: no byte of it reached the edge within the body idle timeout (`--ingress-body-idle-timeout`, default 10 s); the connection (HTTP/1.1) or stream (HTTP/2) is closed after the answer.' },
  ERR_SERVICE_862: { status: 503, summary: 'The edge is buffering as many request bodies (for webhook_verification or a sign-in callback) as the server holds at once (`--ingress-buffer-mib`, default 256); retry after Retry-After seconds.' },
  ERR_SERVICE_863: { status: 429, summary: 'The connection already has 16 MiB of request bodies buffered at the edge (for webhook_verification or a sign-in callback); send the request again once those are answered.' },
  ERR_SERVICE_701: { status: 421, summary: 'The request names a host other than the one its TLS connection was opened for (SNI); open a connection for that host.' },
  ERR_SERVICE_500: { status: 500, summary: 'An internal error occurred.' },
  ERR_SERVICE_503: { status: 503, summary: 'The server is shutting down, or its database is unavailable (unreachable, restarting, out of connections) or did not answer within a bound (docs/operations.md); retry after Retry-After seconds.' },
  ERR_SERVICE_507: { status: 503, summary: 'The database\'s disk is full (SQLite SQLITE_FULL, PostgreSQL 53100), so nothing can be written; reads still work. Retry after Retry-After seconds, once space is freed; /healthz reports storage "full" meanwhile.' },
  ERR_SERVICE_504: { status: 504, summary: 'The agent did not acknowledge the command within a few seconds.' },
} as const satisfies Record<string, { status: number; summary: string }>;

export type ErrorCode = keyof typeof ERRORS;

/** An API error: a code from the registry, a sentence a user can act on, and details. */
export class ApiError extends Error {
  readonly status: number;
  readonly details: Record<string, unknown>;
  constructor(
    readonly code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERRORS[code].status;
    // DECISIONS: an error naming a field also says why (details.reason), whichever check found it.
    const field = details.field;
    const reason = typeof field === 'string' && message.startsWith(`${field}: `) ? message.slice(field.length + 2) : message;
    this.details = typeof field === 'string' && details.reason === undefined ? { ...details, reason } : details;
  }
}

export const notFound = (what: string, id: string) => new ApiError('ERR_SERVICE_300', `${what} ${id} not found`, { id });

export const invalid = (field: string, reason: string) =>
  new ApiError('ERR_SERVICE_103', `${field}: ${reason}`, { field, reason });
