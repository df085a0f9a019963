// Issue 33's drain (test/helpers/haproxy.ts for the deployment): three instances behind
// HAProxy are replaced one at a time under steady load, each old one stopped with SIGTERM
// (/healthz answers 503, its agents are told to reconnect, --drain-grace passes, what is in
// flight finishes), without one failed request. The replacements start first on spare slots
// of HAProxy's configuration (a start takes many seconds on a loaded 2-core machine; a
// restart in place drains the same way, and the kill -9 case restarts nothing).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable } from '../../scripts/pg-cluster.mjs';
import { haproxyBin, startCluster, type Cluster } from '../helpers/haproxy.js';
import { until } from '../helpers/wait.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the rolling-restart suite: initdb is not on the PATH ***\n');
if (!haproxyBin) console.warn('\n*** SKIPPING the rolling-restart suite: haproxy is not installed (.ci/run installs Debian\'s) ***\n');

describe.skipIf(!available || !haproxyBin)('a rolling SIGTERM restart behind HAProxy', () => {
  let c: Cluster;
  beforeAll(async () => { c = await startCluster({ slots: 6, running: 3, graceSeconds: 3 }); }, 85_000);
  afterAll(() => c?.close());

  it('replaces all three instances, one SIGTERM at a time, under load, without one failed request', async () => {
    const l = c.load(4);
    const fresh = await Promise.all([3, 4, 5].map((n) => c.start(n)));
    for (const n of [3, 4, 5]) c.instances[n] = fresh[n - 3];
    // HAProxy's rise (2 checks, 400 ms apart) for the new ones.
    await until(async () => (await Promise.all([3, 4, 5].map((n) => c.healthy(n)))).every(Boolean), 20_000);
    await new Promise((r) => setTimeout(r, 1500));
    const stops: string[] = [];
    for (const n of [0, 1, 2]) {
      const old = c.instances[n]!;
      const t0 = Date.now();
      old.serving.child.kill('SIGTERM');
      expect(await old.serving.exited).toBe(0);
      c.instances[n] = undefined;
      stops.push(`${Date.now() - t0} ms`);
    }
    // A little load on the new instances alone.
    await new Promise((r) => setTimeout(r, 1000));
    const results = await l.stop();
    const failed = results.filter((r) => r.result !== 'ok');
    console.log(`rolling restart: ${results.length} requests, ${failed.length} failed; each old instance stopped (SIGTERM to exit, 3 s grace included) in ${stops.join(', ')}${failed.length ? `: ${failed.slice(0, 5).map((r) => r.result).join(' | ')}` : ''}`);
    expect(failed.map((r) => r.result)).toEqual([]);
  }, 85_000);
});
