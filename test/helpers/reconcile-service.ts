// `edgeform reconcile` as a long-running process against a test server, and its JSON log
// lines read back: each run's line (msg "reconcile run"), the address its metrics are on.
import { startCli, type CliProcess, type Env } from './cli-process.js';
import type { TestServer } from './server.js';
import { until } from './wait.js';

export interface ReconcileService {
  proc: CliProcess;
  /** Every run's log line so far, oldest first. */
  runs(): any[];
  /** Waits for a run (after the first `after` runs) whose line `match` accepts; returns it. */
  waitRun(match: (line: any) => boolean, after?: number, ms?: number): Promise<any>;
  /** http://HOST:PORT of --metrics-address, once it serves. */
  metricsUrl(): Promise<string>;
}

const lines = (text: string) => text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));

export function startReconcile(s: TestServer | { url: string; token: string }, args: string[], env: Env = {}): ReconcileService {
  const proc = startCli(['reconcile', ...args], { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, ...env });
  const runs = () => lines(proc.stdout).filter((l) => l.msg === 'reconcile run');
  return {
    proc,
    runs,
    async waitRun(match, after = 0, ms = 60_000) {
      let found: any;
      await until(() => (found = runs().slice(after).find(match)) !== undefined, ms, () => `no such run within ${ms} ms:\n${proc.stdout}\n${proc.stderr}`);
      return found;
    },
    async metricsUrl() {
      await proc.waitFor('"metrics_address"', 60_000, 'stdout');
      return `http://${lines(proc.stdout).find((l) => l.metrics_address).metrics_address}`;
    },
  };
}
