// How long a change made by hand lives before `edgeform reconcile` puts it back: told by the
// server's change events, and found on the interval alone (--no-events). A fresh server
// in-process, one managed IP policy, one reconcile process per mode; each trial PATCHes the
// policy at a random moment and polls it (every 20 ms) until it reads as declared again.
//   npx tsx bench/drift-delay.ts [--trials 5] [--interval 10s]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { resolveConfig } from '../server/config.js';
import { startServer } from '../server/main.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxyzAB';
const argv = process.argv.slice(2);
const arg = (name: string, dflt: string) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt);
const trials = Number(arg('--trials', '5'));
const interval = arg('--interval', '10s');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-drift-'));
const server = await startServer({ ...resolveConfig({ port: 0, dataDir: dir, apiRateLimit: 0 }, {}), bootstrapToken: TOKEN, log: () => {} });
const api = async (method: string, p: string, body?: unknown) => {
  const res = await request(`${server.url}${p}`, { method: method as 'GET', headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  return (await res.body.json()) as any;
};
const manifests = path.join(dir, 'manifests');
fs.mkdirSync(manifests);
fs.writeFileSync(path.join(manifests, 'office.yaml'), 'kind: IPPolicy\nname: office\ndescription: office\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function mode(label: string, args: string[]) {
  const child = spawn(process.execPath, [path.join(here, '../bin/edgeform.js'), 'reconcile', '-f', manifests, '--stack', 'bench', ...args], {
    env: { ...process.env, EDGEFORM_API_URL: server.url, EDGEFORM_API_KEY: TOKEN },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  while (!out.includes('"reconcile run"')) await sleep(50);
  await sleep(2000);
  const id = (await api('GET', '/ip_policies')).ip_policies[0].id;
  const delays: number[] = [];
  for (let i = 0; i < trials; i++) {
    await sleep(1000 + Math.random() * 3000);
    const t0 = performance.now();
    await api('PATCH', `/ip_policies/${id}`, { description: `by hand ${i}` });
    while ((await api('GET', `/ip_policies/${id}`)).description !== 'office') await sleep(20);
    delays.push(performance.now() - t0);
  }
  child.kill('SIGTERM');
  await new Promise((r) => child.on('close', r));
  delays.sort((a, b) => a - b);
  const s = (ms: number) => (ms / 1000).toFixed(2);
  process.stdout.write(`| ${label} | ${s(delays[Math.floor(delays.length / 2)])} | ${s(delays[0])}-${s(delays[delays.length - 1])} | ${trials} |\n`);
}

process.stdout.write(`${os.cpus()[0]?.model}, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)}, ${new Date().toISOString()}\n\n| mode | median s | range s | trials |\n|---|---|---|---|\n`);
try {
  await mode('events (--metrics-address, interval 1h)', ['--interval', '1h', '--metrics-address', '127.0.0.1:0']);
  await mode(`interval only (--no-events, --interval ${interval})`, ['--interval', interval, '--no-events']);
} finally {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
