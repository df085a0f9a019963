// The traffic-policy engine's hot loops (issue 15), each beside a bare baseline measured in
// the same run: rate-limit decisions per second, whole on_http_request evaluations per
// second (one CEL expression and a rate-limit keyed by a header), and memory per live
// bucket, over 1 and 1,000,000 distinct keys. One process, so one core.
//   npm run bench:policy                     # node --expose-gc, about 20 s
//   npm run bench:policy -- --keys 1,100000 --seconds 0.5
import os from 'node:os';
import { performance } from 'node:perf_hooks';
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

    console.log(`rate-limit decisions/s        ${fmt(decisions).padStart(12)}   baseline (Map counter) ${fmt(baseline).padStart(12)}   target >= 2,000,000`);
    console.log(`on_http_request evaluations/s ${fmt(evaluations).padStart(12)}   baseline (URL parse, startsWith, Map counter) ${fmt(evalBaseline).padStart(10)}   target >= 300,000   (${fmt(limited)} limited)`);
    // Over one bucket the heap's own noise is larger than the bucket.
    if (n >= 10_000) console.log(`bytes per live bucket         ${fmt(bucketBytes).padStart(12)}   baseline (Map entry)   ${fmt(mapBytes).padStart(12)}   target < 200   (${fmt(liveBuckets)} live, key of ${`scope\u0000per-key\u000060\u0000${keys[0]}`.length} chars included)`);
    console.log('');
  }
  console.log(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
}

main();
