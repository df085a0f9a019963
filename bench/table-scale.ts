// The routing table at scale (issues 28.5 and 27.8), against a real `edgeform serve` process:
//   1. 10,000 HTTPS edges (each with a route to an http_response backend), seeded into the
//      SQLite file (copies of one edge and route made through the API, with their references
//      and unique keys: through the API it took minutes on a loaded machine): the ingress
//      p50/p99 at rest, during 20 API writes a second (a route's description PATCHed, which
//      the table applies), and during 20 agent reconnects a second (an agent speaking the
//      protocol in this process, binding a labeled tunnel, closing and connecting again), each
//      beside the figure at rest;
//   2. a million IP policy rules in one policy guarding a route, seeded straight into the
//      SQLite file (rows cloned from one rule made through the API, with its reference and
//      unique key, in one transaction: the API would take minutes): the time from starting
//      `edgeform serve` to the first ingress answer and its RSS then, one rule added and deleted
//      through the API with the request right after each (live on the next request?), and the
//      p50/p99 during 20 rule writes a second.
// Usage: npx tsx bench/table-scale.ts [--edges 10000] [--rules 1000000] [--seconds 10] [--only edges|rules]
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { fakeAgent, validHello } from '../test/helpers/agent.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const EDGES = Number(arg('edges', '10000'));
const RULES = Number(arg('rules', '1000000'));
const SECONDS = Number(arg('seconds', '10'));
const ONLY = arg('only', '');
/** --rules-dir DIR: seed the million rules into DIR once and start from it again on later runs (the seeding takes minutes). */
const RULES_DIR = arg('rules-dir', '');
/** --start-only: the rules part measures the start (table read, first answer, RSS) and stops. */
const START_ONLY = process.argv.includes('--start-only');
const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'edgeform.js');
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const children: ChildProcess[] = [];
process.on('exit', () => { for (const c of children) c.kill('SIGKILL'); });

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** A child process; resolves when its output has `ready` (and says when that was). */
function start(args: string[], ready: string, env: Record<string, string> = {}): Promise<{ child: ChildProcess; readyAt: number; out: () => string }> {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let done = false;
    child.stdout!.on('data', (c) => {
      if (done) return;
      out += c;
      if (out.includes(ready)) { done = true; resolve({ child, readyAt: performance.now(), out: () => out }); }
    });
    child.on('exit', (code) => { if (!done) reject(new Error(`${args.join(' ')} exited ${code}:\n${out.slice(-2000)}`)); });
  });
}

interface Serve { child: ChildProcess; api: string; ingress: number; ca: string; startedMs: number; firstAnswerMs?: number; tableMs?: number }

async function serve(dir: string, opts: { ingress: boolean; probeHost?: string }): Promise<Serve> {
  const apiPort = await freePort();
  const ingress = await freePort();
  const t0 = performance.now();
  const args = [BIN, 'serve', '--port', String(apiPort), '--data-dir', dir, '--api-rate-limit', '0', '--workers', '1', ...(opts.ingress ? ['--ingress', `443=127.0.0.1:${ingress}`] : [])];
  const { child, readyAt, out } = await start(args, opts.ingress ? 'ingress for public port' : 'listening', { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
  const ca = opts.ingress ? fs.readFileSync(path.join(dir, 'ingress-ca.pem'), 'utf8') : '';
  const tableMs = /"table_ms":(\d+)/.exec(out())?.[1];
  const s: Serve = { child, api: `http://127.0.0.1:${apiPort}`, ingress, ca, startedMs: readyAt - t0, tableMs: tableMs === undefined ? undefined : Number(tableMs) };
  if (opts.probeHost) {
    for (;;) {
      const r = await get(s, opts.probeHost).catch(() => undefined);
      if (r) break;
      await new Promise((res) => setTimeout(res, 20));
    }
    s.firstAnswerMs = performance.now() - t0;
  }
  return s;
}

async function stop(s: Serve) {
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
}

async function api(s: Serve, method: string, p: string, body?: unknown): Promise<any> {
  const r = await fetch(`${s.api}${p}`, { method, headers: { Authorization: `Bearer ${TOKEN}`, 'Service-Version': '2', ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

const agents = new Map<string, https.Agent>();
/** One request to the ingress for `host` over a keep-alive TLS connection: its status and time. */
function get(s: Serve, host: string): Promise<{ status: number; ms: number }> {
  let agent = agents.get(host);
  if (!agent) agents.set(host, (agent = new https.Agent({ keepAlive: true, maxSockets: 2 })));
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port: s.ingress, servername: host, path: '/', headers: { host }, ca: s.ca, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t }));
    });
    req.setTimeout(30_000, () => req.destroy(new Error('no answer in 30 s')));
    req.on('error', reject);
    req.end();
  });
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];

/** Requests from `clients` loops over `hosts` for `seconds`, while `side` runs: p50/p99 and the statuses seen. */
async function measure(s: Serve, hosts: string[], seconds: number, side?: (until: () => boolean) => Promise<number>): Promise<{ p50: number; p99: number; n: number; statuses: Record<string, number>; side?: number }> {
  const times: number[] = [];
  const statuses: Record<string, number> = {};
  const end = performance.now() + seconds * 1000;
  const going = () => performance.now() < end;
  const sideRun = side?.(going);
  await Promise.all(Array.from({ length: 4 }, async (_v, c) => {
    for (let n = c; going(); n += 4) {
      // A kept-alive connection the server closed as it was reused is the client's race, not an answer: counted, not timed.
      const r = await get(s, hosts[n % hosts.length]).catch((e: NodeJS.ErrnoException) => ({ status: e.code ?? 'error', ms: -1 }));
      if (r.ms >= 0) times.push(r.ms);
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    }
  }));
  const sideCount = await sideRun;
  times.sort((a, b) => a - b);
  return { p50: pct(times, 50), p99: pct(times, 99), n: times.length, statuses, side: sideCount };
}

/** Calls `one` 20 times a second until told to stop; how many it made. */
async function paced(until: () => boolean, one: (i: number) => Promise<unknown>): Promise<number> {
  let i = 0;
  const t0 = performance.now();
  while (until()) {
    await one(i).catch((e) => console.error(`  (side call failed: ${(e as Error).message})`));
    i++;
    const wait = t0 + i * 50 - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  return i;
}

const fmt = (m: { p50: number; p99: number; n: number; statuses: Record<string, number>; side?: number }, rest?: { p50: number }) =>
  `p50 ${m.p50.toFixed(2)} ms, p99 ${m.p99.toFixed(2)} ms (${m.n} requests, statuses ${JSON.stringify(m.statuses)}${m.side !== undefined ? `, ${m.side} side calls` : ''})${rest ? `; p50 ${(m.p50 / rest.p50).toFixed(2)}x the figure at rest` : ''}`;

/** CPU seconds (user + system) a process has used, from /proc. */
const cpuSeconds = (pid: number) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/** Clones rows of the SQLite file: `count` copies of the sample resources (with their references and unique keys), each string value rewritten by `rewrite(i)`. */
function cloneRows(file: string, sampleIds: string[], count: number, rewrite: (i: number) => [string, string][]) {
  const db = new Database(file);
  const where = (col: string) => `"${col}" IN (${sampleIds.map(() => '?').join(',')})`;
  const sets: [string, Record<string, any>[]][] = [
    ['Resource', db.prepare(`SELECT * FROM "Resource" WHERE ${where('id')} ORDER BY "createdAt"`).all(...sampleIds) as Record<string, any>[]],
    ['Reference', db.prepare(`SELECT * FROM "Reference" WHERE ${where('fromId')}`).all(...sampleIds) as Record<string, any>[]],
    ['UniqueKey', db.prepare(`SELECT * FROM "UniqueKey" WHERE ${where('resourceId')}`).all(...sampleIds) as Record<string, any>[]],
  ];
  const inserts = sets.map(([table, rows]) => rows.map((row) => db.prepare(`INSERT INTO "${table}" (${Object.keys(row).map((k) => `"${k}"`).join(',')}) VALUES (${Object.keys(row).map(() => '?').join(',')})`)));
  db.transaction(() => {
    for (let i = 0; i < count; i++) {
      const pairs = rewrite(i);
      const fix = (v: unknown) => (typeof v === 'string' ? pairs.reduce((t, [a, b]) => t.split(a).join(b), v) : v);
      sets.forEach(([, rows], k) => rows.forEach((row, j) => inserts[k][j].run(...Object.values(row).map(fix))));
    }
  })();
  db.close();
}

const idOf = (prefix: string, i: number) => `${prefix}_${String(i).padStart(27, '0')}`;

async function edgesBench() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-table-'));
  let s = await serve(dir, { ingress: false });
  const backend = await api(s, 'POST', '/backends/http_response', { body: 'hello', status_code: 200 });
  const sampleEdge = await api(s, 'POST', '/edges/https', { hostports: ['sample.example.com:443'] });
  const sampleRoute = await api(s, 'POST', `/edges/https/${sampleEdge.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backend.id } });
  await stop(s);
  const t0 = performance.now();
  cloneRows(path.join(dir, 'edgeform.db'), [sampleEdge.id, sampleRoute.id], EDGES, (i) => [[sampleEdge.id, idOf('edghts', i)], [sampleRoute.id, idOf('edghtsrt', i)], ['sample.example.com', `e${i}.example.com`]]);
  console.log(`${EDGES} edges with a route each (to one http_response backend) seeded into the SQLite file in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  s = await serve(dir, { ingress: true, probeHost: 'e0.example.com' });
  console.log(`start with ${EDGES} edges: the routing table read in ${((s.tableMs ?? NaN) / 1000).toFixed(2)} s; first ingress answer ${(s.firstAnswerMs! / 1000).toFixed(2)} s after the process started`);
  const routes = Array.from({ length: EDGES }, (_v, i) => ({ edge: idOf('edghts', i), route: idOf('edghtsrt', i) }));
  const hosts = Array.from({ length: 40 }, (_v, i) => `e${Math.floor((i * EDGES) / 40)}.example.com`);
  await measure(s, hosts, 2); // warm-up: connections, compiled edges
  const rest = await measure(s, hosts, SECONDS);
  console.log(`at rest:                          ${fmt(rest)}`);
  const writes = await measure(s, hosts, SECONDS, (until) => paced(until, (i) => {
    const r = routes[(i * 7919) % routes.length];
    return api(s, 'PATCH', `/edges/https/${r.edge}/routes/${r.route}`, { description: `write ${i}` });
  }));
  console.log(`during 20 API writes/s:           ${fmt(writes, rest)}`);
  // Agents that connect, bind a labeled tunnel and leave, in this process (the protocol over a
  // real socket, test/helpers/agent.ts): `edgeform agent` processes would spend the machine's
  // two cores starting Node rather than measure the server.
  const cred = await api(s, 'POST', '/credentials', { acl: [] });
  const answer = (p: string): [number, unknown] => (p === '/_edgeform/hello' ? [200, validHello([{ name: 'bench', labels: { app: 'bench' }, forwards_to: '127.0.0.1:1' }])] : [204, undefined]);
  let connected = await fakeAgent(s.api, cred.token, answer);
  const reconnects = await measure(s, hosts, SECONDS, (until) => paced(until, async () => {
    connected.close();
    connected = await fakeAgent(s.api, cred.token, answer);
    const deadline = performance.now() + 5000;
    while (!connected.seen.some((x) => x.path === '/_edgeform/hello') && performance.now() < deadline) await new Promise((r) => setTimeout(r, 2));
  }));
  connected.close();
  const sessions = (await api(s, 'GET', '/tunnel_sessions')).tunnel_sessions.length;
  console.log(`during 20 agent reconnects/s:     ${fmt(reconnects, rest)} (sessions listed after: ${sessions})`);
  console.log(`RSS of edgeform serve with ${EDGES} edges: ${rssMb(s.child.pid!).toFixed(0)} MB`);
  await stop(s);
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Makes the sample through the API and clones it into the SQLite file (RULES rules in one policy guarding a route); remembers that it did. */
async function seedRules(dir: string): Promise<{ policyId: string }> {
  const s = await serve(dir, { ingress: false });
  const backend = await api(s, 'POST', '/backends/http_response', { body: 'guarded', status_code: 200 });
  const policy = await api(s, 'POST', '/ip_policies', {});
  const sample = await api(s, 'POST', '/ip_policy_rules', { ip_policy_id: policy.id, cidr: '10.0.0.0/32', action: 'deny' });
  const edge = await api(s, 'POST', '/edges/https', { hostports: ['guarded.example.com:443'] });
  await api(s, 'POST', `/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backend.id }, ip_restriction: { ip_policy_ids: [policy.id] } });
  await stop(s);

  // The seed: RULES - 1 more rules like the sample (deny, one /32 each, in 10.0.0.0/8 and up), with its reference and unique key.
  const t0 = performance.now();
  const db = new Database(path.join(dir, 'edgeform.db'));
  const res = db.prepare('SELECT * FROM "Resource" WHERE "id" = ?').get(sample.id) as Record<string, any>;
  const refs = db.prepare('SELECT * FROM "Reference" WHERE "fromId" = ?').all(sample.id) as Record<string, any>[];
  const keys = db.prepare('SELECT * FROM "UniqueKey" WHERE "resourceId" = ?').all(sample.id) as Record<string, any>[];
  const insert = (table: string, row: Record<string, any>) => db.prepare(`INSERT INTO "${table}" (${Object.keys(row).map((k) => `"${k}"`).join(',')}) VALUES (${Object.keys(row).map(() => '?').join(',')})`);
  const insRes = insert('Resource', res);
  const insRef = refs.map((r) => insert('Reference', r));
  const insKey = keys.map((k) => insert('UniqueKey', k));
  const data = JSON.parse(res.data);
  const sampleCidr = data.body.cidr as string;
  db.transaction(() => {
    for (let i = 1; i < RULES; i++) {
      const n = 0x0a000000 + i;
      const cidr = `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/32`;
      const id = `ipr_${String(i).padStart(27, '0')}`;
      insRes.run(...Object.values({ ...res, id, data: JSON.stringify({ ...data, body: { ...data.body, cidr } }) }));
      refs.forEach((r, k) => insRef[k].run(...Object.values({ ...r, fromId: id })));
      keys.forEach((key, k) => insKey[k].run(...Object.values({ ...key, resourceId: id, value: String(key.value).replace(sampleCidr, cidr) })));
    }
  })();
  db.close();
  console.log(`${RULES} IP policy rules seeded into the SQLite file in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  fs.writeFileSync(path.join(dir, 'seeded.json'), JSON.stringify({ policyId: policy.id, rules: RULES }));
  return { policyId: policy.id };
}

async function rulesBench() {
  const dir = RULES_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-rules-'));
  const seeded = path.join(dir, 'seeded.json');
  const { policyId } = fs.existsSync(seeded) ? (JSON.parse(fs.readFileSync(seeded, 'utf8')) as { policyId: string }) : await seedRules(dir);
  const policy = { id: policyId };
  const s = await serve(dir, { ingress: true, probeHost: 'guarded.example.com' });  console.log(`start with ${RULES} rules: the routing table read in ${((s.tableMs ?? NaN) / 1000).toFixed(2)} s; ingress listening ${(s.startedMs / 1000).toFixed(2)} s and first ingress answer ${(s.firstAnswerMs! / 1000).toFixed(2)} s after the process started; ${cpuSeconds(s.child.pid!).toFixed(2)} CPU s by then; RSS ${rssMb(s.child.pid!).toFixed(0)} MB; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  if (START_ONLY) {
    await stop(s);
    return;
  }
  const first = await get(s, 'guarded.example.com');
  const added = await api(s, 'POST', '/ip_policy_rules', { ip_policy_id: policy.id, cidr: '127.0.0.1/32', action: 'deny' });
  const t1 = performance.now();
  const denied = await get(s, 'guarded.example.com');
  const afterAdd = performance.now() - t1;
  await api(s, 'DELETE', `/ip_policy_rules/${added.id}`);
  const t2 = performance.now();
  const allowed = await get(s, 'guarded.example.com');
  const afterDelete = performance.now() - t2;
  console.log(`before: ${first.status}; next request after adding a deny rule for 127.0.0.1: ${denied.status} in ${afterAdd.toFixed(1)} ms; after deleting it: ${allowed.status} in ${afterDelete.toFixed(1)} ms`);
  const hosts = ['guarded.example.com'];
  const rest = await measure(s, hosts, SECONDS);
  console.log(`at rest:                          ${fmt(rest)}`);
  const made: string[] = [];
  const writes = await measure(s, hosts, SECONDS, (until) => paced(until, async (i) => {
    if (i % 2 === 0) made.push((await api(s, 'POST', '/ip_policy_rules', { ip_policy_id: policy.id, cidr: `192.0.${(i >> 8) & 255}.${i & 255}/32`, action: 'deny' })).id);
    else await api(s, 'DELETE', `/ip_policy_rules/${made.shift()}`);
  }));
  console.log(`during 20 rule writes/s:          ${fmt(writes, rest)}`);
  global.gc?.();
  console.log(`RSS of edgeform serve with ${RULES} rules after the writes: ${rssMb(s.child.pid!).toFixed(0)} MB`);
  await stop(s);
  if (!RULES_DIR) fs.rmSync(dir, { recursive: true, force: true });
}

console.log(`bench/table-scale: ${os.cpus()[0].model}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
if (ONLY !== 'rules') await edgesBench();
if (ONLY !== 'edges') await rulesBench();
process.exit(0);
