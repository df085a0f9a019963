// `edgeform policy test`: runs a traffic policy against a request offline, on a fake clock,
// and says what each rule and action did and what the client would get.
import fs from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { isMap, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import { parseDuration, PHASES, type Phase, type PolicyIssue } from '../provider/catalog/validate/traffic-policy.js';
import { Problems } from '../reconciler/manifest/problems.js';
import { compilePolicy, evaluate, isCompiled, PolicyState, type CompiledPolicy, type PolicyInput, type PolicyResult } from '../server/policy/index.js';
import { recordUpstream, type HttpResponse } from '../server/policy/actions/run.js';
import { replaceSse } from '../server/policy/actions/service.js';
import { worthCompressing } from '../server/ingress/modules/compression.js';
import { UsageError, type Io } from './reconcile.js';
import { policyShowCommand } from './policy-show.js';

const collect = (v: string, prior: string[] = []) => [...prior, v];

function positiveInt(v: string) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 1_000_000) throw new InvalidArgumentError('It must be an integer from 1 to 1000000.');
  return n;
}

function interval(v: string) {
  const s = v === '0' ? 0 : parseDuration(v);
  if (s === undefined) throw new InvalidArgumentError('It must be a duration such as 500ms, 2s or 1m.');
  return Math.round(s * 1000);
}

/** The line of a problem's path in the policy file (the nearest node that exists). */
function lineOf(doc: Document, lines: LineCounter, path: string): number {
  const parts = path.split(/\.|\[(\d+)\]/).filter((p) => p !== undefined && p !== '').map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  for (let n = parts.length; n >= 0; n--) {
    const node = doc.getIn(parts.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    if (node?.range) return lines.linePos(node.range[0]).line;
  }
  return (isMap(doc.contents) || isSeq(doc.contents)) && doc.contents.range ? lines.linePos(doc.contents.range[0]).line : 1;
}

export function problemsOf(file: string, text: string, issues: PolicyIssue[]): Problems {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  const problems = new Problems();
  for (const i of issues) {
    // An expression's message names its rule and column already; others name their path.
    const said = !i.path || i.message.startsWith(i.path.split(/[.[]/)[0]) ? i.message : `${i.path}: ${i.message}`;
    problems.add({ file, line: lineOf(doc, lines, i.path) }, said);
  }
  return problems;
}

function requestOf(text: string, headers: string[]): { method: string; url: string; headers: Record<string, string[]> } {
  const m = /^\s*([A-Za-z]+)\s+(\S+)\s*$/.exec(text);
  if (!m || !URL.canParse(m[2]) || !/^https?:$/.test(new URL(m[2]).protocol)) throw new UsageError(`--request must be 'METHOD URL', such as 'GET https://app.example.com/api?x=1', not ${JSON.stringify(text)}`);
  const out: Record<string, string[]> = {};
  for (const h of headers) {
    const i = h.indexOf(':');
    if (i <= 0) throw new UsageError(`-H must be 'Name: value', not ${JSON.stringify(h)}`);
    (out[h.slice(0, i).trim()] ??= []).push(h.slice(i + 1).trim());
  }
  return { method: m[1].toUpperCase(), url: m[2], headers: out };
}

interface Run {
  n: number;
  at_ms: number;
  phases: Partial<Record<Phase, PolicyResult>>;
  /** What the client gets: a response the policy made, or the request forwarded upstream. */
  forwarded: boolean;
  response?: HttpResponse;
  /** A forwarded request: the upstream's answer as the client gets it, after on_http_response (body rewritten, compression chosen). */
  client_response?: HttpResponse;
  /** forward-internal: the internal endpoint the request goes to. */
  forwarded_internal?: string;
  closed?: boolean;
  limited: boolean;
}

/** The stand-in for the upstream's answer when a request is forwarded (--upstream-status, --upstream-header, --upstream-body): on_http_response runs on it. */
const UPSTREAM: HttpResponse = { status: 200, headers: {}, body: '' };

const settled = async (r: PolicyResult): Promise<PolicyResult> => (r.pending ? settled(await r.pending) : r);

async function runOnce(policy: CompiledPolicy, state: PolicyState, base: Omit<PolicyInput, 'now'>, upstream: HttpResponse, now: number, n: number, atMs: number): Promise<Run> {
  const run: Run = { n, at_ms: atMs, phases: {}, forwarded: false, limited: false };
  const ended = (r: PolicyResult) => r.outcome !== 'continue';
  if (policy.phases.on_tcp_connect) {
    const r = (run.phases.on_tcp_connect = await settled(evaluate(policy, 'on_tcp_connect', { conn: base.conn, now }, state)));
    if (ended(r)) return { ...run, closed: true };
  }
  if (!base.req) return { ...run, forwarded: true };
  const req = await settled(evaluate(policy, 'on_http_request', { ...base, now }, state));
  run.phases.on_http_request = req;
  let response: HttpResponse;
  // 'answered' (a server answered itself) only happens at the ingress; offline it cannot, but it ends as a close would.
  if (req.outcome === 'close' || req.outcome === 'answered') return { ...run, closed: true };
  if (req.outcome !== 'continue' && 'forward_internal' in req.outcome) return { ...run, forwarded_internal: req.outcome.forward_internal.url };
  if (req.outcome !== 'continue') {
    response = req.outcome.response;
    run.limited = req.actions.service.rate_limit.limited;
    if (policy.phases.on_http_response === undefined) return { ...run, response };
  } else {
    run.forwarded = true;
    response = upstream;
    // The upstream's answer is what circuit-breaker actions count.
    recordUpstream(req.mutations, now, upstream.status);
  }
  // A forwarded request's response edits made in on_http_request (a response_headers module,
  // a compression module) apply to the answer as the ingress applies them: after on_http_response
  // has read the upstream's own headers, before that phase's edits.
  const early = run.forwarded ? req.mutations.response : undefined;
  const editedEarly = !!early && (early.remove_headers.length > 0 || Object.keys(early.set_headers).length > 0 || !!early.compress);
  const applyEarly = (r: HttpResponse): HttpResponse => {
    if (!early || !editedEarly) return r;
    const headers = { ...r.headers };
    for (const h of early.remove_headers) delete headers[h];
    Object.assign(headers, early.set_headers);
    if (early.compress && worthCompressing({ status: r.status, headers }, base.req!.method)) {
      headers['content-encoding'] = early.compress;
      delete headers['content-length'];
    }
    return { ...r, headers };
  };
  if (policy.phases.on_http_response) {
    const raw = response;
    response = applyEarly(response);
    const res = await settled(evaluate(policy, 'on_http_response', { ...base, now, res: { status_code: raw.status, headers: raw.headers, body: raw.body }, actions: req.actions, vars: req.vars }, state));
    run.phases.on_http_response = res;
    if (res.outcome === 'close' || res.outcome === 'answered') return { ...run, forwarded: false, closed: true };
    if (res.outcome !== 'continue' && 'response' in res.outcome) return { ...run, forwarded: false, response: res.outcome.response, limited: res.actions.service.rate_limit.limited };
    const m = res.mutations.response;
    const headers = { ...response.headers, ...m.set_headers };
    for (const h of m.remove_headers) delete headers[h];
    let body = m.body ?? response.body;
    if (m.sse_replace?.length && /^text\/event-stream/i.test(String(headers['content-type'] ?? ''))) body = replaceSse(body, m.sse_replace);
    if (m.body !== undefined) delete headers['content-length'];
    if (m.compress) {
      headers['content-encoding'] = m.compress;
      delete headers['content-length'];
    }
    response = { ...response, headers, body };
  } else response = applyEarly(response);
  if (run.forwarded) return policy.phases.on_http_response || upstream !== UPSTREAM || editedEarly ? { ...run, client_response: response } : run;
  return { ...run, response };
}

function phaseText(phase: Phase, r: PolicyResult, note: string): string {
  const lines = [`${phase}${note}:`];
  if (!r.rules.length) lines.push('  no rules');
  for (const rule of r.rules) {
    lines.push(`  rule ${rule.index}${rule.name ? ` (${rule.name})` : ''}: ${rule.matched ? 'matched' : 'not matched'}${rule.error ? ` (expression failed: ${rule.error})` : ''}`);
    for (const a of rule.actions) lines.push(`    ${a.did}`);
  }
  const req = r.mutations.request;
  const changes = [
    ...Object.entries(req.set_headers).map(([k, v]) => `set ${k}: ${v}`),
    ...req.remove_headers.map((h) => `remove ${h}`),
    ...(req.url ? [`URL ${req.url}`] : []),
  ];
  if (phase === 'on_http_request' && r.outcome === 'continue' && changes.length) lines.push(`  upstream request: ${changes.join('; ')}`);
  return lines.join('\n');
}

function outcomeText(run: Run): string {
  if (run.closed) return 'connection closed';
  if (run.forwarded_internal) return `forwarded to ${run.forwarded_internal}`;
  if (run.forwarded) return 'forwarded upstream';
  const r = run.response!;
  const retry = r.headers['retry-after'];
  return `${r.status}${retry ? ` (retry-after: ${retry}s)` : ''}`;
}

function detailText(run: Run): string {
  const parts = (Object.entries(run.phases) as [Phase, PolicyResult][]).map(([p, r]) => phaseText(p, r, p === 'on_http_response' && run.phases.on_http_request?.outcome === 'continue' ? (run.client_response ? ` (on the upstream's ${run.client_response.status} given with --upstream-*)` : ' (on a stand-in 200 response from upstream)') : ''));
  for (const r of Object.values(run.phases)) for (const l of r?.mutations.logs ?? []) parts.push(`log: ${JSON.stringify(l, (_k, v) => (typeof v === 'bigint' ? Number(v) : v))}`);
  if (run.closed) parts.push('Result: connection closed');
  else if (run.forwarded_internal) parts.push(`Result: forwarded to the internal endpoint ${run.forwarded_internal}`);
  else if (run.forwarded && run.client_response) {
    const r = run.client_response;
    parts.push(`Result: forwarded upstream; the client gets ${r.status}`, ...Object.entries(r.headers).map(([k, v]) => `  ${k}: ${v}`), ...(r.body ? [`  body: ${JSON.stringify(r.body)}${r.headers['content-encoding'] ? ' (before compression)' : ''}`] : []));
  } else if (run.forwarded) parts.push('Result: forwarded upstream');
  else {
    const r = run.response!;
    parts.push(`Result: response ${r.status}`, ...Object.entries(r.headers).map(([k, v]) => `  ${k}: ${v}`), ...(r.body ? [`  body: ${JSON.stringify(r.body)}`] : []));
  }
  return parts.join('\n');
}

function summaryOf(runs: Run[]) {
  const limited = runs.filter((r) => r.limited);
  const forwarded = runs.filter((r) => r.forwarded).length;
  const first = limited[0]?.response?.headers['retry-after'];
  return { requests: runs.length, forwarded, limited: limited.length, other: runs.length - forwarded - limited.length, first_retry_after: first === undefined ? null : Number(first) };
}

export function policyCommand(setCode: (code: number) => void, io: () => Io): Command {
  const test = new Command('test')
    .description('Run a traffic policy (YAML or JSON) against a request offline: which rules match, what each action does, and the response or "forwarded upstream".')
    .argument('<file>', 'the traffic-policy document')
    .option('--request <request>', "the request, 'METHOD URL' (required by on_http_request and on_http_response rules; without it only on_tcp_connect runs)")
    .option('-H, --header <header>', "a request header, 'Name: value' (repeatable)", collect, [] as string[])
    .option('--client-ip <ip>', 'the client address (conn.client_ip)', '192.0.2.1')
    .option('--repeat <n>', 'send the request N times and summarise', positiveInt, 1)
    .option('--interval <duration>', 'fake-clock time between repeated requests (500ms, 2s)', interval, 0)
    .option('--body <text>', 'the request body (read by verify-webhook, request-body-find-replace, req.content_length)')
    .option('--body-file <path>', 'the request body, from a file')
    .option('--upstream-status <code>', "the upstream's answer status for on_http_response (default 200)", (v: string) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 100 || n > 599) throw new InvalidArgumentError('It must be an HTTP status from 100 to 599.');
      return n;
    })
    .option('--upstream-header <header>', "a header of the upstream's answer, 'Name: value' (repeatable)", collect, [] as string[])
    .option('--upstream-body <text>', "the upstream's answer body (response-body-find-replace, compress-response)")
    .option('--upstream-body-file <path>', "the upstream's answer body, from a file")
    .option('--json', 'print one JSON document')
    .action((file: string, opts: Record<string, any>) => {
      const out = io();
      return runTest(out, file, opts).then(setCode, (e: unknown) => {
        if (opts.json) out.out(`${JSON.stringify({ error: (e as Error).message })}\n`);
        out.err(`${out.errStyle.red('Error:')} ${(e as Error).message}\n`);
        setCode(e instanceof UsageError ? 2 : 1);
      });
    });
  return new Command('policy').description('Work with traffic-policy documents: test one offline, or show a route as the policy the ingress runs for it.').addCommand(test).addCommand(policyShowCommand(setCode, io));
}

function readInput(path: string, what: string): string {
  try {
    return fs.readFileSync(path, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read the ${what} ${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
}

function upstreamOf(opts: Record<string, any>): HttpResponse {
  if (opts.upstreamBody !== undefined && opts.upstreamBodyFile !== undefined) throw new UsageError('give --upstream-body or --upstream-body-file, not both');
  const body: string | undefined = opts.upstreamBody ?? (opts.upstreamBodyFile !== undefined ? readInput(opts.upstreamBodyFile, 'upstream body') : undefined);
  if (opts.upstreamStatus === undefined && !opts.upstreamHeader.length && body === undefined) return UPSTREAM;
  const headers: Record<string, string> = {};
  for (const h of opts.upstreamHeader as string[]) {
    const i = h.indexOf(':');
    if (i <= 0) throw new UsageError(`--upstream-header must be 'Name: value', not ${JSON.stringify(h)}`);
    const name = h.slice(0, i).trim().toLowerCase();
    headers[name] = headers[name] === undefined ? h.slice(i + 1).trim() : `${headers[name]}, ${h.slice(i + 1).trim()}`;
  }
  return { status: opts.upstreamStatus ?? 200, headers, body: body ?? '' };
}

async function runTest(out: Io, file: string, opts: Record<string, any>): Promise<number> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read the policy ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  const compiled = compilePolicy(text, { phases: PHASES, offline: true });
  if (!isCompiled(compiled)) {
    const problems = problemsOf(file, text, compiled.problems);
    if (opts.json) out.out(`${JSON.stringify({ valid: false, problems: problems.list })}\n`);
    else out.err(`${problems.text()}\n${out.errStyle.red(`${problems.list.length} problem${problems.list.length === 1 ? '' : 's'} found.`)}\n`);
    return 1;
  }
  const req: PolicyInput['req'] = opts.request ? requestOf(opts.request, opts.header) : undefined;
  if (!req && opts.header.length) throw new UsageError('-H needs --request');
  if (opts.body !== undefined && opts.bodyFile !== undefined) throw new UsageError('give --body or --body-file, not both');
  const body: string | undefined = opts.body ?? (opts.bodyFile !== undefined ? readInput(opts.bodyFile, 'request body') : undefined);
  if (body !== undefined) {
    if (!req) throw new UsageError('--body needs --request');
    req.body = body;
  }
  const upstream = upstreamOf(opts);
  // Without a request only on_tcp_connect runs: an HTTP policy would print "forwarded upstream"
  // having run none of its rules.
  const http = (['on_http_request', 'on_http_response'] as const).filter((p) => compiled.phases[p]?.length);
  if (!req && http.length) throw new UsageError(`the policy has ${http.join(' and ')} rules, which run on a request: give one with --request 'METHOD URL' (e.g. --request 'GET https://app.example.com/')`);
  const url = req && new URL(req.url);
  const base: Omit<PolicyInput, 'now'> = {
    conn: { client_ip: opts.clientIp, server_port: url ? Number(url.port || (url.protocol === 'https:' ? 443 : 80)) : 443, ...(url?.protocol === 'https:' ? { tls_version: '1.3' } : {}) },
    ...(req ? { req } : {}),
  };
  const state = new PolicyState();
  const start = Date.now();
  const runs: Run[] = [];
  for (let i = 0; i < opts.repeat; i++) runs.push(await runOnce(compiled, state, base, upstream, start + i * opts.interval, i + 1, i * opts.interval));
  const summary = summaryOf(runs);
  if (opts.json) {
    out.out(`${JSON.stringify({ valid: true, requests: runs.map(jsonOf), summary })}\n`);
    return 0;
  }
  out.out(`${req ? `${req.method} ${req.url}` : 'TCP connection'} from ${opts.clientIp}\n\n${detailText(runs[0])}\n`);
  if (runs.length > 1) {
    out.out('\n');
    let last = outcomeText(runs[0]);
    for (const r of runs.slice(1)) {
      const now = outcomeText(r);
      // Every request whose outcome differs from the one before, and the last.
      if (now !== last || r === runs.at(-1)) out.out(`#${r.n} at ${r.at_ms / 1000}s: ${now}\n`);
      last = now;
    }
    const other = summary.other ? `, ${summary.other} answered by the policy` : '';
    out.out(`\n${summary.requests} requests: ${summary.forwarded} forwarded, ${summary.limited} limited${summary.first_retry_after !== null ? ` (first retry-after: ${summary.first_retry_after}s)` : ''}${other}\n`);
  }
  return 0;
}

function jsonOf(r: Run) {
  return {
    n: r.n,
    at_ms: r.at_ms,
    phases: Object.fromEntries(Object.entries(r.phases).map(([p, x]) => [p, { rules: x!.rules, outcome: x!.outcome, mutations: jsonMutations(x!.mutations) }])),
    result: r.closed ? 'closed' : r.forwarded ? 'forwarded' : r.forwarded_internal ? 'forwarded_internal' : 'response',
    ...(r.response ? { response: r.response } : {}),
    ...(r.client_response ? { client_response: r.client_response } : {}),
    ...(r.forwarded_internal ? { forwarded_internal: r.forwarded_internal } : {}),
  };
}

/** Mutations as JSON: the breakers and compiled patterns the ingress needs are left out, bigints become numbers. */
function jsonMutations(m: PolicyResult['mutations']) {
  const { circuit_breakers: _b, ...request } = m.request;
  const { find_replace: _f, ...response } = m.response;
  return JSON.parse(JSON.stringify({ ...m, request, response }, (_k, v) => (typeof v === 'bigint' ? Number(v) : v)));
}
