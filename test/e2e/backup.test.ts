// `edgeform backup` of a running server under write load holds every write acknowledged
// before it began (creates and PATCHes), and `edgeform restore` puts it back: a fresh server
// on the restored database with the same key reads them all. A restore is refused while a
// server holds the database. On SQLite and on PostgreSQL (pg_dump / pg_restore).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { startPostgres } from '../../scripts/pg-cluster.mjs';
import { runCliProcess } from '../helpers/cli-process.js';
import { DATABASES } from '../helpers/databases.js';
import { api, killServers, serve } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

afterEach(killServers);
afterAll(removeTempDirs);
const pgs: { stop(): void }[] = [];
afterAll(() => { for (const pg of pgs) pg.stop(); });

const TOKEN = 'backuptest0123456789abcdefghijklmnopqrstuvwxyzAB';
const KEY = 'aa112233445566778899aabbccddeeff00112233445566778899aabbccddeeff';
const cleared = () => Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('EDGEFORM_')).map((k) => [k, undefined]));
const cli = (args: string[], env: Record<string, string> = {}) => runCliProcess(args, { ...cleared(), ...env }, { timeoutMs: 120_000 });

interface Ack { id: string; rev: number; at: number }

/** Writers that create IP policies and PATCH each a few times, recording every acknowledged write and when it was acknowledged. */
function writeLoad(url: string, writers: number) {
  const acks: Ack[] = [];
  let stopping = false;
  const one = async () => {
    while (!stopping) {
      const created = await api(`${url}/ip_policies`, TOKEN, 'POST', { description: 'rev-0' });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      acks.push({ id, rev: 0, at: Date.now() });
      for (let rev = 1; rev <= 3 && !stopping; rev++) {
        const patched = await api(`${url}/ip_policies/${id}`, TOKEN, 'PATCH', { description: `rev-${rev}` });
        expect(patched.status).toBe(200);
        await patched.arrayBuffer();
        acks.push({ id, rev, at: Date.now() });
      }
    }
  };
  const running = Promise.all(Array.from({ length: writers }, one));
  return { acks, stop: async () => { stopping = true; await running; } };
}

/** Every IP policy's description revision, following next_page_uri. */
async function revisions(url: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let next: string | null = `${url}/ip_policies?limit=100`;
  while (next) {
    const page = (await (await api(next, TOKEN)).json()) as { ip_policies: { id: string; description: string }[]; next_page_uri: string | null };
    for (const p of page.ip_policies) out.set(p.id, Number(p.description.replace('rev-', '')));
    next = page.next_page_uri;
  }
  return out;
}

describe.each(DATABASES)('edgeform backup and restore on $db', ({ db: kind, skip }) => {
  it.skipIf(skip)('a backup taken under write load holds every write acknowledged before it began; a restore into a fresh server reads them back', async () => {
    const dir = tempDir();
    const pg = kind === 'PostgreSQL' ? await startPostgres() : undefined;
    if (pg) pgs.push(pg);
    const source = pg ? ['--database', await pg.createDatabase('source')] : ['--data-dir', dir];
    const target = pg ? ['--database', await pg.createDatabase('target')] : ['--data-dir', tempDir()];
    const env = { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN, EDGEFORM_SECRET_KEY: KEY };
    const server = await serve([...source, '--api-rate-limit', '0'], env);
    const load = writeLoad(server.url, 4);
    await until(() => load.acks.length >= 40, 60_000, () => `only ${load.acks.length} writes acknowledged`);

    const file = path.join(tempDir(), 'edgeform.backup');
    const began = Date.now();
    const backup = await cli(['backup', file, ...source, '--json'], env);
    const writtenDuring = load.acks.filter((a) => a.at > began).length;
    await load.stop();
    expect(backup.code, backup.stderr).toBe(0);
    const summary = JSON.parse(backup.stdout);
    expect(summary).toMatchObject({ provider: kind === 'SQLite' ? 'sqlite' : 'postgresql', file });
    expect(backup.stderr).toMatch(/^backing up /m);
    expect(backup.stderr).toMatch(/the secret key is not in it/);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // The server wrote on while the backup ran (the load did not wait for it).
    expect(writtenDuring).toBeGreaterThan(0);

    // A second backup to the same file is refused without --force.
    const again = await cli(['backup', file, ...source], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/exists; choose another file, or pass --force/);

    const restored = await cli(['restore', file, ...target, '--json'], env);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout).notes).toEqual([]);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);

    const fresh = await serve([...target, '--api-rate-limit', '0'], env);
    const got = await revisions(fresh.url);
    const before = load.acks.filter((a) => a.at < began);
    expect(before.length).toBeGreaterThanOrEqual(40);
    const missing = before.filter((a) => !got.has(a.id) || got.get(a.id)! < a.rev);
    expect(missing, `${missing.length} of ${before.length} acknowledged writes missing`).toEqual([]);

    // A restore over the database the fresh server holds is refused, and changes nothing.
    const busy = await cli(['restore', file, ...target, '--force'], env);
    expect(busy.code).toBe(1);
    expect(busy.stderr.trim().split('\n')).toHaveLength(1);
    expect(busy.stderr).toMatch(kind === 'SQLite' ? /another edgeform server is running on the SQLite database/ : /other session\(s\) are connected .*stop every instance/);
    expect((await api(`${fresh.url}/ip_policies/${before[0].id}`, TOKEN)).status).toBe(200);
    fresh.child.kill('SIGTERM');
    expect(await fresh.exited).toBe(0);
  }, 240_000);
});

describe('edgeform backup and restore: options and refusals', () => {
  it('--help names the exit codes; a file that is no backup is refused; a restore with another key warns; over a database with data, --force is needed', async () => {
    const help = await cli(['backup', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Exit codes: 0 written, 1 failed/);
    expect((await cli(['restore', '--help'])).stdout).toMatch(/Refused\s+while a server runs on the database/);

    const dir = tempDir();
    const server = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
    const file = path.join(tempDir(), 'b.db');
    expect((await cli(['backup', file, '--data-dir', dir])).code).toBe(0);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);

    const junk = path.join(tempDir(), 'junk');
    fs.writeFileSync(junk, 'not a database at all, not even close to one...............');
    const notBackup = await cli(['restore', junk, '--data-dir', tempDir(), '--json']);
    expect(notBackup.code).toBe(1);
    expect(JSON.parse(notBackup.stdout).error).toMatch(/is not a SQLite database/);

    // The original folder holds a database: --force replaces it.
    const over = await cli(['restore', file, '--data-dir', dir]);
    expect(over.code).toBe(1);
    expect(over.stderr).toMatch(/already holds a database; pass --force/);
    expect((await cli(['restore', file, '--data-dir', dir, '--force'])).code).toBe(0);

    // Another folder, no key there: restored, with a warning about the key.
    const other = tempDir();
    const warned = await cli(['restore', file, '--data-dir', other]);
    expect(warned.code, warned.stderr).toBe(0);
    expect(warned.stderr).toMatch(/Warning: the restored database's secrets are sealed with a key that is not at .*secret\.key/);
    fs.copyFileSync(path.join(dir, 'secret.key'), path.join(other, 'secret.key'));
    const back = await serve(['--data-dir', other]);
    expect((await api(`${back.url}/ip_policies`, TOKEN)).status).toBe(200);
    back.child.kill('SIGTERM');
    expect(await back.exited).toBe(0);
  }, 180_000);
});
