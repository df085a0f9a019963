// The one order in which an HTTPS route's modules run, with the reason for each place
// (docs/ingress.md repeats it). Filters never know their neighbours; this list does.
export const MODULE_ORDER = [
  { name: 'ip_restriction', why: 'the cheapest refusal (the client address only), before any other work' },
  { name: 'user_agent_filter', why: 'a header match, still before anything costly' },
  { name: 'traffic_policy', why: 'rate limits and deny rules run before sign-in and body reads; its on_http_response phase sees the final upstream answer' },
  { name: 'basic_auth', why: "agents' endpoints only (the SDK's basic auth; no API route has it): a password check before the body is read or the upstream is reached, after traffic_policy so its rate limits bound guessing" },
  { name: 'oauth', why: 'sign-in before the request body is read or the upstream is reached' },
  { name: 'oidc', why: 'as oauth' },
  { name: 'saml', why: 'as oauth' },
  { name: 'webhook_verification', why: 'reads (and bounds) the body to check the signature; after the cheap refusals' },
  { name: 'circuit_breaker', why: 'wraps only the upstream call, so refusals above never count as upstream errors' },
  { name: 'request_headers', why: 'the last edit of what goes upstream, so its additions and removals win' },
  { name: 'response_headers', why: 'edits the upstream answer before compression chooses an encoding' },
  { name: 'compression', why: 'last on the response: sees the final content type and length' },
  { name: 'websocket_tcp_converter', why: 'terminal for WebSocket upgrades: replaces the HTTP backend with a TCP stream' },
] as const;

export type ModuleName = (typeof MODULE_ORDER)[number]['name'];
