// What an action is given when it runs and what it gives back. An action either lets the
// request go on (possibly changed) or ends it with a response (or, on TCP, a closed connection).
// An action that must wait (a side call: http-request, a JWKS fetch) returns `pending`; the
// engine then finishes the phase asynchronously, and only then (the common path stays synchronous).
import type { Template } from '../../../provider/catalog/validate/policy/template.js';
import type { Re2Pattern } from '../../../provider/catalog/validate/regex.js';
import type { CircuitBreaker } from '../../ingress/modules/circuit-state.js';
import type { Phase } from '../../../provider/catalog/validate/traffic-policy.js';
import type { CelVariables } from '../context.js';
import type { PolicyState } from '../state.js';

export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Where forward-internal sends a request (the endpoints code resolves the URL). */
export interface ForwardTarget { url: string; binding?: string; on_error: 'halt' | 'continue' }

/**
 * How a request or connection ended. `answered`: the server running the engine answered it
 * itself (a route module's action at the ingress: a sign-in redirect, a taken WebSocket).
 */
export type Ended = { response: HttpResponse } | 'close' | 'answered' | { forward_internal: ForwardTarget };

/** Changes to pass on: to the request sent upstream, or to the response sent to the client. */
export interface HeaderChanges { set_headers: Record<string, string>; remove_headers: string[] }

/** What a phase asks of the server besides headers: a body to rewrite, a compression, an internal forward, a log line. */
export interface Mutations {
  request: HeaderChanges & {
    url?: string;
    /** The request body to send upstream instead (request-body-find-replace). */
    body?: string;
    /** Send the request to this internal endpoint instead of the route's backend (forward-internal; the endpoints code resolves it). */
    forward_internal?: ForwardTarget;
    /** circuit-breaker: the breakers that let this request through; the caller reports the upstream's outcome to them (recordUpstream). */
    circuit_breakers?: CircuitBreaker[];
  };
  response: HeaderChanges & {
    /** The response body to send the client instead (response-body-find-replace; policy test and the ingress apply it). */
    body?: string;
    /** compress-response: the encoding chosen for the client, applied as the body streams. */
    compress?: string;
    /** sse-find-replace: replacements applied to each event-stream message's field. */
    sse_replace?: { field: string; from: string; to: string }[];
    /** response-body-find-replace when the body was not in the input: the ingress applies these as the body streams. */
    find_replace?: { from: Re2Pattern; to: string }[];
  };
  /** log actions' lines, for the server's log (and `policy test`). */
  logs?: Record<string, unknown>[];
}

export interface RunContext {
  phase: Phase;
  vars: CelVariables;
  state: PolicyState;
  now: number;
  mutations: Mutations;
  /** The action's compiled `${}` strings; read fields through expand(). */
  templates: Map<string, Template>;
  /** What the server running the engine gives its actions (the ingress: the exchange or connection); undefined in `policy test`. */
  host?: unknown;
}

export interface ActionRun {
  /** Set when the action ends the request or connection. */
  ended?: Ended;
  /** One line saying what the action did, for `edgeform policy test` and logs. */
  did: string;
  /** Set when the action must wait; its outcome is this promise's. */
  pending?: Promise<Omit<ActionRun, 'pending'>>;
}

/** A compiled action, ready to run. */
export type Runner = (ctx: RunContext) => ActionRun;

/** What a runner is made with: the policy's scope (rate-limit buckets), and the hooks a server gives (forward-internal). */
export interface MakeContext {
  scope: string;
  /** The server's runner for a route module's action (the ingress gives the module's own code); absent, the action runs its offline form (`policy test`). */
  moduleRunner?: (type: string, config: unknown) => Runner | undefined;
  /** `edgeform policy test`: module actions the server gives no runner for run their offline forms (elsewhere such a policy is refused). */
  offline?: boolean;
}

/** Makes the runner of one compiled action from its typed config. */
export type RunnerFactory = (config: any, make: MakeContext) => Runner;

/** A string field of the configuration with its `${expr}` interpolations expanded. */
export function expand(ctx: RunContext, text: string): string {
  const t = ctx.templates.get(text);
  return t ? t(ctx.vars) : text;
}

/** A map of strings (headers) with each value expanded. */
export function expandAll(ctx: RunContext, map: Record<string, string>): Record<string, string> {
  if (ctx.templates.size === 0) return map;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(map)) out[k] = expand(ctx, v);
  return out;
}

export const respond = (status: number, body: string, headers: Record<string, string> = {}): Ended => ({
  response: { status, headers: { 'content-type': 'text/plain; charset=utf-8', ...headers }, body },
});

/** The header lists an HTTP action changes in its phase, copied on the first change of an evaluation. */
export function headersOf(ctx: RunContext): { lists: Record<string, string[]>; changes: HeaderChanges } {
  if (ctx.phase === 'on_http_response') return { lists: ctx.vars.res!.headers, changes: ctx.mutations.response };
  return { lists: ctx.vars.req!.headers, changes: ctx.mutations.request };
}

/** Reports the upstream's answer (a status, or 'error' when there was none) to the circuit breakers a request phase let it through. */
export function recordUpstream(m: Mutations, now: number, outcome: number | 'error'): void {
  for (const b of m.request.circuit_breakers ?? []) b.record(now, outcome === 'error' || outcome >= 500);
}
