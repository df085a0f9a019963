// A small stand-in for the ingress's Exchange: enough for a route module's filter to read the
// request, answer or pass it on, without a listener. `run` drives one filter and says whether
// the backend (next) was reached.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PolicyState } from '../../server/policy/index.js';
import type { EdgeAnswer, Exchange, FullDoc, HttpFilter, IngressDeps, IngressTable } from '../../server/ingress/types.js';
import { IpRuleSet, type IpAction } from '../../server/ingress/ip-rules.js';

export interface FakeRequest {
  method?: string;
  url?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  clientIp?: string;
  host?: string;
  publicPort?: number;
}

/** A table with no edges and these IP policies, each a list of rules (ids made up). */
export function emptyTable(ipPolicies: Map<string, { cidr: string; action: IpAction }[]> = new Map()): IngressTable {
  return { version: 1, ports: new Map(), certificates: [], backends: new Map(), ipPolicies: ruleSets(ipPolicies), certificateAuthorities: new Map() };
}

/** IP policies as the table holds them, from lists of rules (each given an id). */
export function ruleSets(policies: Map<string, { cidr: string; action: IpAction }[]>): IngressTable['ipPolicies'] {
  return new Map([...policies].map(([id, rules]) => [id, IpRuleSet.of(rules.map((r, i) => ({ id: `ipr_${id}_${i}`, ...r })))]));
}

export function fakeDeps(now = Date.now(), logs: Record<string, unknown>[] = []): IngressDeps {
  return { gateway: undefined as never, policyState: new PolicyState(), log: (f) => logs.push(f), now: () => now };
}

export function fakeExchange(r: FakeRequest, table: IngressTable = emptyTable(), deps: IngressDeps = fakeDeps()) {
  const headers = Object.fromEntries(Object.entries(r.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  const body = Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body ?? '');
  let answer: EdgeAnswer | undefined;
  let reads = 0;
  const ex: Exchange = {
    req: { headers, url: r.url ?? '/', method: r.method ?? 'POST' } as unknown as IncomingMessage,
    res: {} as ServerResponse,
    clientIp: r.clientIp ?? '127.0.0.1',
    scheme: 'https',
    host: r.host ?? 'app.example.com',
    publicPort: r.publicPort ?? 443,
    table,
    edge: { id: 'edghts_test' } as FullDoc,
    route: { id: 'edghtsrt_test' } as FullDoc,
    deps,
    method: r.method ?? 'POST',
    path: r.url ?? '/',
    upstreamHeaders: { ...headers },
    async readBody(limit: number) {
      reads++;
      if (body.length > limit) throw new Error('body over limit');
      return body;
    },
    onResponseHead() {},
    onResponseBody() {},
    outcome: undefined,
    answer(a) {
      answer = a;
    },
    get answered() {
      return answer !== undefined;
    },
    async connectBackend() {
      throw new Error('no backend in a fake exchange');
    },
    locals: {},
  };
  return { ex, answer: () => answer, reads: () => reads };
}

/** Runs one filter on a fake exchange: the answer it gave (if any) and whether next() ran. */
export async function run(filter: HttpFilter, r: FakeRequest, table?: IngressTable, deps?: IngressDeps) {
  const f = fakeExchange(r, table, deps);
  let reached = false;
  await filter.handle(f.ex, async () => {
    reached = true;
  });
  return { reached, answer: f.answer(), status: f.answer()?.status, code: f.answer()?.code, reads: f.reads() };
}
