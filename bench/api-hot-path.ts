// The API's hot path against its own stack: edgeform and a bare Fastify server doing the
// same reads (bearer-token digest lookup, Service-Version check, the row, its embedded
// children) on the same database driver, loaded alternately in one run with autocannon at
// 10 connections. Prints req/s, p50/p99, the ratio and the server's CPU per request.
// Usage: npm run bench:api [-- --db sqlite|postgresql --duration 5 --rounds 3 --only get,list,post,patch]
//   --baseline DIR: also load the edgeform of another checkout (e.g. before a change) in the same rounds.
//   --cpu-prof DIR: a V8 CPU profile of the edgeform server, written when the run ends.
// Each server runs in its own process (this one only generates load); its CPU time is read over IPC.
import autocannon from 'autocannon';
import { fork, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const argOf = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const TOKEN = 'benchtoken0123456789abcdefghijklmnopqrstuvwxy';
const POLICIES = 200;
const here = fileURLToPath(import.meta.url);

// ---------------------------------------------------------------------------------------
// The bare baseline: Fastify + the database driver, nothing else.

interface BareStore {
  keyOf(digest: string): Promise<{ key_id: string; owner_id: string } | undefined>;
  one(id: string): Promise<Record<string, unknown> | undefined>;
  page(limit: number): Promise<Record<string, unknown>[]>;
  insert(description: string): Promise<Record<string, unknown>>;
  patch(id: string, metadata: string): Promise<Record<string, unknown> | undefined>;
}

type ItemRow = { id: string; parent_id: string | null; created_at: string; data: string };
const shape = (row: ItemRow, children: ItemRow[]) => ({
  id: row.id, uri: `http://bare/ip_policies/${row.id}`, created_at: row.created_at, ...JSON.parse(row.data),
  rules: children.map((c) => ({ id: c.id, uri: `http://bare/ip_policy_rules/${c.id}`, created_at: c.created_at, ...JSON.parse(c.data) })),
});
const newBareId = (prefix: string) => `${prefix}_${randomBytes(15).toString('base64url')}`;
const digestOf = (token: string) => createHash('sha256').update(token).digest('hex');

async function sqliteBare(file: string): Promise<BareStore> {
  const { default: Sqlite } = await import('better-sqlite3');
  const db = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE IF NOT EXISTS bare_token (digest TEXT PRIMARY KEY, key_id TEXT, owner_id TEXT);
    CREATE TABLE IF NOT EXISTS bare_item (id TEXT PRIMARY KEY, parent_id TEXT, created_at TEXT, data TEXT);
    CREATE INDEX IF NOT EXISTS bare_item_parent ON bare_item(parent_id);`);
  const key = db.prepare('SELECT key_id, owner_id FROM bare_token WHERE digest = ?');
  const one = db.prepare('SELECT * FROM bare_item WHERE id = ?');
  const children = db.prepare('SELECT * FROM bare_item WHERE parent_id = ? ORDER BY id');
  const page = db.prepare("SELECT * FROM bare_item WHERE id LIKE 'ipp\\_%' ESCAPE '\\' ORDER BY id DESC LIMIT ?");
  const insert = db.prepare('INSERT INTO bare_item (id, parent_id, created_at, data) VALUES (?, ?, ?, ?)');
  const update = db.prepare('UPDATE bare_item SET data = ? WHERE id = ?');
  const childrenOf = (ids: string[]) => {
    const rows = db.prepare(`SELECT * FROM bare_item WHERE parent_id IN (${ids.map(() => '?').join(',')}) ORDER BY id`).all(...ids) as ItemRow[];
    return (id: string) => rows.filter((r) => r.parent_id === id);
  };
  const store: BareStore = {
    keyOf: async (d) => key.get(d) as { key_id: string; owner_id: string } | undefined,
    one: async (id) => {
      const row = one.get(id) as ItemRow | undefined;
      return row && shape(row, children.all(id) as ItemRow[]);
    },
    page: async (limit) => {
      const rows = page.all(limit) as ItemRow[];
      const of = childrenOf(rows.map((r) => r.id));
      return rows.map((r) => shape(r, of(r.id)));
    },
    insert: async (description) => {
      const row = { id: newBareId('ipp'), parent_id: null, created_at: new Date().toISOString(), data: JSON.stringify({ description, metadata: '' }) };
      insert.run(row.id, null, row.created_at, row.data);
      return shape(row, []);
    },
    patch: async (id, metadata) => db.transaction(() => {
      const row = one.get(id) as ItemRow | undefined;
      if (!row) return undefined;
      row.data = JSON.stringify({ ...JSON.parse(row.data), metadata });
      update.run(row.data, id);
      return shape(row, children.all(id) as ItemRow[]);
    })(),
  };
  return store;
}

async function pgBare(url: string): Promise<BareStore> {
  const { default: Pg } = await import('pg');
  const pool = new Pg.Pool({ connectionString: url, max: 10 });
  await pool.query(`CREATE TABLE IF NOT EXISTS bare_token (digest TEXT PRIMARY KEY, key_id TEXT, owner_id TEXT);
    CREATE TABLE IF NOT EXISTS bare_item (id TEXT COLLATE "C" PRIMARY KEY, parent_id TEXT, created_at TEXT, data TEXT);
    CREATE INDEX IF NOT EXISTS bare_item_parent ON bare_item(parent_id);`);
  const rows = async (text: string, values: unknown[], name?: string) => (await pool.query({ text, values, name })).rows as ItemRow[];
  return {
    keyOf: async (d) => (await pool.query({ name: 'key', text: 'SELECT key_id, owner_id FROM bare_token WHERE digest = $1', values: [d] })).rows[0],
    one: async (id) => {
      const [row] = await rows('SELECT * FROM bare_item WHERE id = $1', [id], 'one');
      return row && shape(row, await rows('SELECT * FROM bare_item WHERE parent_id = $1 ORDER BY id', [id], 'children'));
    },
    page: async (limit) => {
      const page = await rows("SELECT * FROM bare_item WHERE id LIKE 'ipp\\_%' ORDER BY id DESC LIMIT $1", [limit], 'page');
      const kids = await rows('SELECT * FROM bare_item WHERE parent_id = ANY($1) ORDER BY id', [page.map((r) => r.id)], 'kids');
      return page.map((r) => shape(r, kids.filter((k) => k.parent_id === r.id)));
    },
    insert: async (description) => {
      const row = { id: newBareId('ipp'), parent_id: null, created_at: new Date().toISOString(), data: JSON.stringify({ description, metadata: '' }) };
      await pool.query({ name: 'insert', text: 'INSERT INTO bare_item (id, parent_id, created_at, data) VALUES ($1, $2, $3, $4)', values: [row.id, null, row.created_at, row.data] });
      return shape(row, []);
    },
    patch: async (id, metadata) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const [row] = (await client.query({ name: 'lock', text: 'SELECT * FROM bare_item WHERE id = $1 FOR NO KEY UPDATE', values: [id] })).rows as ItemRow[];
        if (!row) return void (await client.query('ROLLBACK'));
        row.data = JSON.stringify({ ...JSON.parse(row.data), metadata });
        await client.query({ name: 'update', text: 'UPDATE bare_item SET data = $1 WHERE id = $2', values: [row.data, id] });
        await client.query('COMMIT');
        return shape(row, (await client.query({ name: 'children', text: 'SELECT * FROM bare_item WHERE parent_id = $1 ORDER BY id', values: [id] })).rows as ItemRow[]);
      } finally {
        client.release();
      }
    },
  };
}

async function serveBare(db: string): Promise<{ url: string; seed: { ids: string[] } }> {
  const store = db.startsWith('postgres') ? await pgBare(db) : await sqliteBare(db);
  const { default: Fastify } = await import('fastify');
  const app = Fastify({ logger: false });
  app.addHook('onRequest', async (request, reply) => {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!bearer) return reply.code(401).send({ error_code: 'ERR_SERVICE_201' });
    const key = await store.keyOf(digestOf(bearer[1]));
    if (!key) return reply.code(401).send({ error_code: 'ERR_SERVICE_202' });
    if (request.headers['service-version'] !== '2') return reply.code(400).send({ error_code: 'ERR_SERVICE_217' });
  });
  app.get('/ip_policies/:id', async (request, reply) => (await store.one((request.params as { id: string }).id)) ?? reply.code(404).send({ error_code: 'ERR_SERVICE_300' }));
  app.get('/ip_policies', async (request) => {
    const limit = Number((request.query as { limit?: string }).limit ?? 100);
    return { ip_policies: await store.page(limit), uri: 'http://bare/ip_policies', next_page_uri: null };
  });
  app.post('/ip_policies', async (request, reply) => reply.code(201).send(await store.insert((request.body as { description?: string }).description ?? '')));
  app.patch('/ip_policies/:id', async (request, reply) => (await store.patch((request.params as { id: string }).id, (request.body as { metadata: string }).metadata)) ?? reply.code(404).send({}));
  // The same data as edgeform's: the key, POLICIES policies of one rule each.
  const ids: string[] = [];
  const seeded = await store.page(1);
  if (!seeded.length) {
    for (let i = 0; i < POLICIES; i++) ids.push(String((await store.insert(`bench ${i}`)).id));
  }
  await seedBareKeyAndRules(db, ids);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, seed: { ids } };
}

/** The bare key's digest and one rule per policy, through the driver directly. */
async function seedBareKeyAndRules(db: string, ids: string[]) {
  const now = new Date().toISOString();
  const rule = (i: number) => JSON.stringify({ description: '', metadata: '', cidr: `10.${i >> 8}.${i & 255}.0/24`, action: 'allow', ip_policy: { id: ids[i] } });
  if (db.startsWith('postgres')) {
    const { default: Pg } = await import('pg');
    const c = new Pg.Client({ connectionString: db });
    await c.connect();
    await c.query('INSERT INTO bare_token VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [digestOf(TOKEN), 'ak_bare', 'usr_bare']);
    for (let i = 0; i < ids.length; i++) await c.query('INSERT INTO bare_item VALUES ($1, $2, $3, $4)', [newBareId('ipr'), ids[i], now, rule(i)]);
    await c.end();
    return;
  }
  const { default: Sqlite } = await import('better-sqlite3');
  const c = new Sqlite(db);
  c.prepare('INSERT OR IGNORE INTO bare_token VALUES (?, ?, ?)').run(digestOf(TOKEN), 'ak_bare', 'usr_bare');
  const add = c.prepare('INSERT INTO bare_item VALUES (?, ?, ?, ?)');
  c.transaction(() => ids.forEach((id, i) => add.run(newBareId('ipr'), id, now, rule(i))))();
  c.close();
}

// ---------------------------------------------------------------------------------------
// edgeform, as `edgeform serve` runs it (request log to stdout, a rate limit that is on).

async function serveEdgeform(db: string): Promise<{ url: string; seed: { ids: string[] } }> {
  const { resolveConfig } = await import('../server/config.js');
  const { startServer } = await import('../server/main.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-api-'));
  const server = await startServer({
    // A limit far above what is sent: its cost per request is measured, it never refuses.
    ...resolveConfig({ host: '127.0.0.1', port: 0, dataDir: dir, apiRateLimit: 100_000_000, authFailureLimit: 0 }, {}),
    ...(db === 'sqlite' ? {} : { databaseUrl: db, secretKey: '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff' }),
    bootstrapToken: TOKEN,
  });
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${server.url}${p}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ id: string }>;
  };
  const ids: string[] = [];
  for (let i = 0; i < POLICIES; i++) {
    const p = await call('POST', '/ip_policies', { description: `bench ${i}` });
    await call('POST', '/ip_policy_rules', { ip_policy_id: p.id, cidr: `10.${i >> 8}.${i & 255}.0/24`, action: 'allow' });
    ids.push(p.id);
  }
  return { url: server.url, seed: { ids } };
}

// ---------------------------------------------------------------------------------------
// The driver: start both, load them alternately, print.

interface Child { proc: ChildProcess; url: string; ids: string[]; cpu(): Promise<number> }

async function startChild(which: 'bare' | 'edgeform', db: string, script = here): Promise<Child> {
  const prof = argOf('cpu-prof', '');
  const execArgv = ['--import', 'tsx', ...(prof && which === 'edgeform' && script === here ? ['--cpu-prof', '--cpu-prof-dir', prof] : [])];
  const proc = fork(script, ['--serve', which, '--db', db], { execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const ready = await new Promise<{ url: string; ids: string[] }>((resolve, reject) => {
    proc.once('message', (m) => resolve(m as { url: string; ids: string[] }));
    proc.once('exit', (code) => reject(new Error(`${which} server exited with ${code}`)));
  });
  const cpu = () => new Promise<number>((resolve) => {
    proc.once('message', (m) => resolve((m as { cpu: number }).cpu));
    proc.send('cpu');
  });
  return { proc, url: ready.url, ids: ready.ids, cpu };
}

interface Workload { name: string; method: 'GET' | 'POST' | 'PATCH'; path: (ids: string[], i: number) => string; body?: (i: number) => string }
const WORKLOADS: Record<string, Workload> = {
  get: { name: 'GET one IP policy', method: 'GET', path: (ids, i) => `/ip_policies/${ids[i % ids.length]}` },
  list: { name: 'GET a page of 100', method: 'GET', path: () => '/ip_policies?limit=100' },
  post: { name: 'POST an IP policy', method: 'POST', path: () => '/ip_policies', body: (i) => JSON.stringify({ description: `load ${i}` }) },
  patch: { name: 'PATCH an IP policy', method: 'PATCH', path: (ids, i) => `/ip_policies/${ids[i % ids.length]}`, body: (i) => JSON.stringify({ metadata: `m ${i}` }) },
};

interface Run { rps: number; p50: number; p99: number; cpuUs: number; errors: number }

async function load(child: Child, w: Workload, seconds: number, connections: number): Promise<Run> {
  let i = 0;
  const cpu0 = await child.cpu();
  // Each response's time as autocannon measures it (hrtime, in ms with a fraction): its own
  // histogram keeps whole milliseconds, too coarse to tell a p99 of 1.2 ms from one of 2.9.
  const times: number[] = [];
  // (The run is both a promise of the result and an emitter of each response; its types say only the first.)
  const job = autocannon({
    url: child.url,
    connections,
    duration: seconds,
    headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', 'content-type': 'application/json' },
    requests: [{
      method: w.method,
      setupRequest: (req) => {
        const n = i++;
        return { ...req, path: w.path(child.ids, n), ...(w.body ? { body: w.body(n) } : {}) };
      },
    }],
  });
  (job as unknown as NodeJS.EventEmitter).on('response', (_client: unknown, status: number, _bytes: number, ms: number) => { if (status < 400) times.push(ms); });
  const result = await job;
  const cpu1 = await child.cpu();
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? NaN;
  return { rps: result.requests.average, p50: at(0.5), p99: at(0.99), cpuUs: (cpu1 - cpu0) / Math.max(1, result.requests.total), errors: result.non2xx + result.errors };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (n: number) => n.toFixed(2);
const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

async function drive() {
  const which = argOf('db', 'sqlite');
  const seconds = Number(argOf('duration', '5'));
  const rounds = Number(argOf('rounds', '3'));
  const connections = Number(argOf('connections', '10'));
  const only = argOf('only', 'get,list,post,patch').split(',');
  const baseline = argOf('baseline', '');
  let stopPg: (() => void) | undefined;
  let bareDb: string;
  let edgeDb: string;
  let baseDb = 'sqlite';
  if (which === 'sqlite') {
    bareDb = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-bench-bare-')), 'bare.db');
    edgeDb = 'sqlite';
  } else {
    // @ts-expect-error: a plain .mjs script without types
    const { startPostgres } = await import('../scripts/pg-cluster.mjs');
    const pg = await startPostgres();
    stopPg = () => pg.stop();
    bareDb = await pg.createDatabase('bare');
    edgeDb = await pg.createDatabase('edgeform');
    if (baseline) baseDb = await pg.createDatabase('baseline');
  }
  const cpus = os.cpus();
  console.log(`machine: ${cpus[0].model}, ${cpus.length} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, Node ${process.version}, ${os.type()} ${os.release()}`);
  console.log(`database: ${which}; ${connections} connections, ${rounds} alternating rounds of ${seconds} s per workload; medians\n`);
  const bare = await startChild('bare', bareDb);
  const edge = await startChild('edgeform', edgeDb);
  const base = baseline ? await startChild('edgeform', baseDb, path.join(path.resolve(baseline), 'bench', 'api-hot-path.ts')) : undefined;
  try {
    if (base) console.log(`baseline: the edgeform in ${baseline}, loaded in the same rounds\n`);
    console.log(`| workload | edgeform req/s | p50 / p99 ms | bare req/s | p50 / p99 ms | ratio | server CPU per request (edgeform vs bare) |${base ? ' baseline req/s | p50 / p99 ms | vs baseline |' : ''}`);
    console.log(`|---|---|---|---|---|---|---|${base ? '---|---|---|' : ''}`);
    for (const key of only) {
      const w = WORKLOADS[key];
      if (!w) throw new Error(`unknown workload ${key}; choose from ${Object.keys(WORKLOADS).join(', ')}`);
      const runs: { bare: Run[]; edge: Run[]; base: Run[] } = { bare: [], edge: [], base: [] };
      // A short warm-up each, then alternate so all see the same machine.
      await load(bare, w, 1, connections);
      await load(edge, w, 1, connections);
      if (base) await load(base, w, 1, connections);
      for (let r = 0; r < rounds; r++) {
        runs.bare.push(await load(bare, w, seconds, connections));
        runs.edge.push(await load(edge, w, seconds, connections));
        if (base) runs.base.push(await load(base, w, seconds, connections));
      }
      const m = (rs: Run[], k: keyof Run) => median(rs.map((x) => x[k]));
      const errors = [...runs.bare, ...runs.edge, ...runs.base].reduce((n, x) => n + x.errors, 0);
      const vsBase = base ? ` ${fmt(m(runs.base, 'rps'))} | ${ms(m(runs.base, 'p50'))} / ${ms(m(runs.base, 'p99'))} | ${fmt(m(runs.edge, 'rps') / m(runs.base, 'rps'), 1)}x |` : '';
      console.log(`| ${w.name} | ${fmt(m(runs.edge, 'rps'))} | ${ms(m(runs.edge, 'p50'))} / ${ms(m(runs.edge, 'p99'))} | ${fmt(m(runs.bare, 'rps'))} | ${ms(m(runs.bare, 'p50'))} / ${ms(m(runs.bare, 'p99'))} | ${fmt(m(runs.edge, 'rps') / m(runs.bare, 'rps'), 2)} | ${fmt(m(runs.edge, 'cpuUs'))} µs vs ${fmt(m(runs.bare, 'cpuUs'))} µs |${vsBase}${errors ? ` (${errors} non-2xx or errors)` : ''}`);
    }
    console.log(`\nload at the end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    const children = [bare, edge, ...(base ? [base] : [])];
    // Asked to exit rather than killed, so that a CPU profile is written (a baseline's older script may not listen).
    for (const c of children) {
      c.proc.send('exit');
      setTimeout(() => c.proc.kill(), 5000).unref();
    }
    await Promise.all(children.map((c) => new Promise((r) => (c.proc.exitCode !== null ? r(null) : c.proc.once('exit', r)))));
    stopPg?.();
  }
}

if (process.argv.includes('--serve')) {
  const which = argOf('serve', 'edgeform');
  const db = argOf('db', 'sqlite');
  const started = which === 'bare' ? await serveBare(db) : await serveEdgeform(db);
  process.on('message', (m) => {
    if (m === 'exit') process.exit(0);
    const u = process.cpuUsage();
    process.send!({ cpu: u.user + u.system });
  });
  process.send!({ url: started.url, ids: started.seed.ids });
} else {
  await drive();
}
