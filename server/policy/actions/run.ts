// What an action is given when it runs and what it gives back. An action either lets the
// request go on (possibly changed) or ends it with a response (or, on TCP, a closed connection).
import type { Phase } from '../../../provider/catalog/validate/traffic-policy.js';
import type { CelVariables } from '../context.js';
import type { PolicyState } from '../state.js';

export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Set by forward-internal: the internal endpoint's URL, which the ingress hands the request to instead of sending this response. */
  forward_internal?: string;
}

export type Ended = { response: HttpResponse } | 'close';

/** Changes to pass on: to the request sent upstream, or to the response sent to the client. */
export interface HeaderChanges { set_headers: Record<string, string>; remove_headers: string[] }
export interface Mutations { request: HeaderChanges & { url?: string }; response: HeaderChanges }

export interface RunContext {
  phase: Phase;
  vars: CelVariables;
  state: PolicyState;
  now: number;
  mutations: Mutations;
}

export interface ActionRun {
  /** Set when the action ends the request or connection. */
  ended?: Ended;
  /** One line saying what the action did, for `edgeform policy test` and logs. */
  did: string;
}

/** A compiled action, ready to run. */
export type Runner = (ctx: RunContext) => ActionRun;

export const respond = (status: number, body: string, headers: Record<string, string> = {}): Ended => ({
  response: { status, headers: { 'content-type': 'text/plain; charset=utf-8', ...headers }, body },
});

/** The header lists an HTTP action changes in its phase, copied on the first change of an evaluation. */
export function headersOf(ctx: RunContext): { lists: Record<string, string[]>; changes: HeaderChanges } {
  if (ctx.phase === 'on_http_response') return { lists: ctx.vars.res!.headers, changes: ctx.mutations.response };
  return { lists: ctx.vars.req!.headers, changes: ctx.mutations.request };
}
