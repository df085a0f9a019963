// `edgeform policy test`: runs a traffic policy against a request offline, on a fake clock,
// and says what each rule and action did and what the client would get.
import fs from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { isMap, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import { parseDuration, PHASES, type Phase, type PolicyIssue } from '../provider/catalog/validate/traffic-policy.js';
import { Problems } from '../reconciler/manifest/problems.js';
import { compilePolicy, evaluate, isCompiled, PolicyState, type CompiledPolicy, type PolicyInput, type PolicyResult } from '../server/policy/index.js';
import type { HttpResponse } from '../server/policy/actions/run.js';
import { UsageError, type Io } from './reconcile.js';

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
  closed?: boolean;
  limited: boolean;
}

/** The stand-in for the upstream's answer when a request is forwarded: on_http_response runs on it. */
const UPSTREAM: HttpResponse = { status: 200, headers: {}, body: '' };

function runOnce(policy: CompiledPolicy, state: PolicyState, base: Omit<PolicyInput, 'now'>, now: number, n: number, atMs: number): Run {
  const run: Run = { n, at_ms: atMs, phases: {}, forwarded: false, limited: false };
  const ended = (r: PolicyResult) => r.outcome !== 'continue';
  if (policy.phases.on_tcp_connect) {
    const r = (run.phases.on_tcp_connect = evaluate(policy, 'on_tcp_connect', { conn: base.conn, now }, state));
    if (ended(r)) return { ...run, closed: true };
  }
  if (!base.req) return { ...run, forwarded: true };
  const req = evaluate(policy, 'on_http_request', { ...base, now }, state);
  run.phases.on_http_request = req;
  let response: HttpResponse;
  if (req.outcome !== 'continue') {
    response = req.outcome === 'close' ? UPSTREAM : req.outcome.response;
    run.limited = req.actions.service.rate_limit.limited;
    if (policy.phases.on_http_response === undefined) return { ...run, response };
  } else {
    run.forwarded = true;
    response = UPSTREAM;
  }
  if (policy.phases.on_http_response) {
    const res = evaluate(policy, 'on_http_response', { ...base, now, res: { status_code: response.status, headers: response.headers }, actions: req.actions }, state);
    run.phases.on_http_response = res;
    if (res.outcome !== 'continue' && res.outcome !== 'close') return { ...run, forwarded: false, response: res.outcome.response, limited: res.actions.service.rate_limit.limited };
    const headers = { ...response.headers, ...res.mutations.response.set_headers };
    for (const h of res.mutations.response.remove_headers) delete headers[h];
    response = { ...response, headers };
  }
  return { ...run, response: run.forwarded ? undefined : response };
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
  if (run.forwarded) return 'forwarded upstream';
  const r = run.response!;
  const retry = r.headers['retry-after'];
  return `${r.status}${retry ? ` (retry-after: ${retry}s)` : ''}`;
}

function detailText(run: Run): string {
  const parts = (Object.entries(run.phases) as [Phase, PolicyResult][]).map(([p, r]) => phaseText(p, r, p === 'on_http_response' && run.phases.on_http_request?.outcome === 'continue' ? ' (on a stand-in 200 response from upstream)' : ''));
  if (run.closed) parts.push('Result: connection closed');
  else if (run.forwarded) parts.push('Result: forwarded upstream');
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
    .option('--json', 'print one JSON document')
    .action((file: string, opts: Record<string, any>) => {
      const out = io();
      try {
        setCode(runTest(out, file, opts));
      } catch (e) {
        if (opts.json) out.out(`${JSON.stringify({ error: (e as Error).message })}\n`);
        out.err(`${out.errStyle.red('Error:')} ${(e as Error).message}\n`);
        setCode(e instanceof UsageError ? 2 : 1);
      }
    });
  return new Command('policy').description('Work with traffic-policy documents offline.').addCommand(test);
}

function runTest(out: Io, file: string, opts: Record<string, any>): number {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read the policy ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  const compiled = compilePolicy(text, { phases: PHASES });
  if (!isCompiled(compiled)) {
    const problems = problemsOf(file, text, compiled.problems);
    if (opts.json) out.out(`${JSON.stringify({ valid: false, problems: problems.list })}\n`);
    else out.err(`${problems.text()}\n${out.errStyle.red(`${problems.list.length} problem${problems.list.length === 1 ? '' : 's'} found.`)}\n`);
    return 1;
  }
  const req = opts.request ? requestOf(opts.request, opts.header) : undefined;
  if (!req && opts.header.length) throw new UsageError('-H needs --request');
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
  for (let i = 0; i < opts.repeat; i++) runs.push(runOnce(compiled, state, base, start + i * opts.interval, i + 1, i * opts.interval));
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
    phases: Object.fromEntries(Object.entries(r.phases).map(([p, x]) => [p, { rules: x!.rules, outcome: x!.outcome, mutations: x!.mutations }])),
    result: r.closed ? 'closed' : r.forwarded ? 'forwarded' : 'response',
    ...(r.response ? { response: r.response } : {}),
  };
}
