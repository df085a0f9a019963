// The traffic-policy engine's hot loops (issue 15), each beside a bare baseline measured in
// the same run: rate-limit decisions per second, whole on_http_request evaluations per
// second (one CEL expression and a rate-limit keyed by a header), and memory per live
// bucket, over 1 and 1,000,000 distinct keys. One process, so one core.
//   npm run bench:policy                     # node --expose-gc, about 20 s
//   npm run bench:policy -- --keys 1,100000 --seconds 0.5
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Environment } from '@marcbachmann/cel-js';
import { compilePolicy, evaluate, isCompiled, PolicyState, type PolicyInput } from '../server/policy/index.js';

function args() {
  const out = { keys: [1, 1_000_000], seconds: 1 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === '--keys') out.keys = argv[i + 1].split(',').map(Number);
    else if (argv[i] === '--seconds') out.seconds = Number(argv[i + 1]);
    else throw new Error(`unknown argument ${argv[i]}; usage: bench/policy.ts [--keys 1,1000000] [--seconds 1]`);
  }
  return out;
}

const gc = (globalThis as { gc?: () => void }).gc;
const heap = () => {
  gc?.();
  gc?.();
  // Typed arrays keep their contents outside the JS heap: count both.
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

/** Calls `step(i)` in batches until `seconds` have passed; returns calls per second. */
function rate(seconds: number, step: (i: number) => void): number {
  let i = 0;
  const start = performance.now();
  const until = start + seconds * 1000;
  let now = start;
  while (now < until) {
    for (const end = i + 10_000; i < end; i++) step(i);
    now = performance.now();
  }
  return i / ((now - start) / 1000);
}

const POLICY = `on_http_request:
  - name: api per key
    expressions: ["req.path.startsWith('/api')"]
    actions:
      - type: rate-limit
        config:
          name: per-key
          algorithm: sliding_window
          capacity: 1000
          rate: 60s
          bucket_key: ["req.headers['x-api-key']"]
`;

/**
 * Issue 35: a realistic policy in the service's language, ten rules with macros and `${}`
 * interpolations (hash, CIDR and query helpers, the parsed user agent, set-vars, a rate limit
 * keyed by a header), the rate limit over 1,000,000 keys.
 */
const RICH = `on_http_request:
  - actions: [{type: restrict-ips, config: {deny: [198.51.100.0/24]}}]
  - expressions: ["req.url.path.startsWith('/api')", "hasReqHeader('x-api-key')"]
    actions:
      - type: rate-limit
        config: {name: per-key, algorithm: sliding_window, capacity: 1000, rate: 60s, bucket_key: ["req.headers['x-api-key']"]}
  - expressions: ["!inCidrRange(conn.client_ip, '10.0.0.0/8')"]
    actions: [{type: add-headers, config: {headers: {x-client: "\${conn.client_ip}"}}}]
  - expressions: ["req.method in ['GET', 'HEAD']"]
    actions: [{type: add-headers, config: {headers: {x-path-hash: "\${hash.crc32(req.url.path)}"}}}]
  - expressions: ["getQueryParam('page').size() > 0"]
    actions: [{type: set-vars, config: {vars: [{page: "\${getQueryParam('page')[0]}"}]}}]
  - expressions: ["req.user_agent.is_bot"]
    actions: [{type: deny}]
  - expressions: ["req.url.path.matches('^/admin')"]
    actions: [{type: deny}]
  - expressions: ["req.headers['x-api-key'][0].size() > 3"]
    actions: [{type: add-headers, config: {headers: {x-key: "key \${req.headers['x-api-key'][0]} page \${vars.page}"}}}]
  - expressions: ["time.now.getHours() >= 0"]
    actions: [{type: remove-headers, config: {headers: [x-internal]}}]
  - expressions: ["actions.ngrok.rate_limit.limited"]
    actions: [{type: custom-response, config: {status_code: 429, body: "\${actions.ngrok.rate_limit.bucket_key} is over its limit"}}]
`;

/** The same tests in plain CEL on the bare library (no engine: no lazy variables, actions, interpolation or budgets). */
const BARE = [
  "!conn.client_ip.startsWith('198.51.100.')",
  "req.path.startsWith('/api') && 'x-api-key' in req.headers",
  "!conn.client_ip.startsWith('10.')",
  "req.method in ['GET', 'HEAD']",
  "'page' in req.query && size(req.query['page']) > 0",
  "req.headers['user-agent'][0].contains('bot')",
  "req.path.startsWith('/admin')",
  "req.headers['x-api-key'][0].size() > 3",
  'true',
  'false',
];

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

function main() {
  const { keys: sizes, seconds } = args();
  const cpus = os.cpus();
  console.log(`machine: ${cpus[0]?.model ?? 'unknown CPU'}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${os.platform()} ${os.arch()}`);
  console.log(`load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}${gc ? '' : '  (no --expose-gc: memory figures are rough)'}\n`);
  const compiled = compilePolicy(POLICY);
  if (!isCompiled(compiled)) throw new Error(JSON.stringify(compiled.problems));
  const clock0 = 1_800_000_000_000;

  for (const n of sizes) {
    const keys = Array.from({ length: n }, (_, i) => `key-${i.toString(36).padStart(6, '0')}`);
    console.log(`== ${fmt(n)} distinct key${n === 1 ? '' : 's'}`);

    // Memory: a bare Map counter, then the limiter; keys made as the engine makes them (a prefix and the value).
    let before = heap();
    const counter = new Map<string, number>();
    for (let i = 0; i < n; i++) counter.set(`p\u0000${keys[i]}`, 1);
    const mapBytes = (heap() - before) / n;
    counter.clear();
    before = heap();
    const memState = new PolicyState({ maxBuckets: Math.max(n, 1) });
    // One instant: buckets made over more than two windows would expire as they go.
    for (let i = 0; i < n; i++) memState.windows.take(`scope\u0000per-key\u000060\u0000${keys[i]}`, 1000, 60_000, clock0);
    const bucketBytes = (heap() - before) / n;
    const liveBuckets = memState.stats().buckets;

    // Decisions: the same key stream, warm (every bucket exists), a slowly moving clock.
    const base = new Map<string, number>();
    const baseline = rate(seconds, (i) => {
      const k = keys[i % n];
      base.set(k, (base.get(k) ?? 0) + 1);
    });
    const state = new PolicyState({ maxBuckets: Math.max(n, 1) });
    for (let i = 0; i < n; i++) state.windows.take(keys[i], 1000, 60_000, clock0);
    const decisions = rate(seconds, (i) => state.windows.take(keys[i % n], 1000, 60_000, clock0 + (i >> 4)));

    // Whole on_http_request evaluations, the input built per request as an ingress would.
    const evalState = new PolicyState({ maxBuckets: Math.max(n, 1) });
    const input = (i: number): PolicyInput => ({
      now: clock0 + (i >> 4),
      conn: { client_ip: '203.0.113.7', server_port: 443, tls_version: '1.3' },
      req: { method: 'GET', url: 'https://app.example.com/api/items?page=2', headers: { 'x-api-key': keys[i % n], 'user-agent': 'bench' } },
    });
    for (let i = 0; i < n; i++) evaluate(compiled, 'on_http_request', input(i), evalState);
    const bareEval = new Map<string, number>();
    const evalBaseline = rate(seconds, (i) => {
      const inp = input(i);
      const url = new URL(inp.req!.url);
      if (url.pathname.startsWith('/api')) {
        const k = inp.req!.headers['x-api-key'] as string;
        bareEval.set(k, (bareEval.get(k) ?? 0) + 1);
      }
    });
    let limited = 0;
    const evaluations = rate(seconds, (i) => {
      if (evaluate(compiled, 'on_http_request', input(i), evalState).outcome !== 'continue') limited++;
    });

    // Issue 35: the ten-rule policy with macros and interpolation, beside the bare CEL library.
    const rich = compilePolicy(RICH);
    if (!isCompiled(rich)) throw new Error(JSON.stringify(rich.problems));
    const richState = new PolicyState({ maxBuckets: Math.max(n, 1) });
    // The rate limit's buckets made directly (the key the engine makes: scope, name, rate, value): evaluating the policy a million times first takes minutes.
    for (let i = 0; i < n; i++) richState.windows.take(`\u0000per-key\u000060\u0000${keys[i]}`, 1000, 60_000, clock0);
    for (let i = 0; i < Math.min(n, 10_000); i++) evaluate(rich, 'on_http_request', input(i), richState);
    const env = new Environment({ homogeneousAggregateLiterals: false });
    env.registerVariable('req', 'map');
    env.registerVariable('conn', 'map');
    const bare = BARE.map((e) => env.parse(e));
    const bareCel = rate(seconds, (i) => {
      const inp = input(i);
      const url = new URL(inp.req!.url);
      const query: Record<string, string[]> = {};
      for (const [k, v] of url.searchParams) (query[k] ??= []).push(v);
      const headers: Record<string, string[]> = {};
      for (const [k, v] of Object.entries(inp.req!.headers)) headers[k.toLowerCase()] = [v as string];
      const ctx = { req: { method: inp.req!.method, path: url.pathname, query, headers }, conn: { client_ip: inp.conn.client_ip } };
      for (const p of bare) p(ctx);
    });
    const richRate = rate(seconds, (i) => evaluate(rich, 'on_http_request', input(i), richState));

    console.log(`10-rule policy evaluations/s  ${fmt(richRate).padStart(12)}   baseline (bare CEL library, the 10 tests alone) ${fmt(bareCel).padStart(10)}   target >= 300,000`);
    console.log(`rate-limit decisions/s        ${fmt(decisions).padStart(12)}   baseline (Map counter) ${fmt(baseline).padStart(12)}   target >= 2,000,000`);
    console.log(`on_http_request evaluations/s ${fmt(evaluations).padStart(12)}   baseline (URL parse, startsWith, Map counter) ${fmt(evalBaseline).padStart(10)}   target >= 300,000   (${fmt(limited)} limited)`);
    // Over one bucket the heap's own noise is larger than the bucket.
    if (n >= 10_000) console.log(`bytes per live bucket         ${fmt(bucketBytes).padStart(12)}   baseline (Map entry)   ${fmt(mapBytes).padStart(12)}   target < 200   (${fmt(liveBuckets)} live, key of ${`scope\u0000per-key\u000060\u0000${keys[0]}`.length} chars included)`);
    console.log('');
  }
  console.log(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
}

main();
