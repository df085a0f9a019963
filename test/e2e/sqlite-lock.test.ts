// One server per SQLite database: a second `edgeform serve` on the same file is refused at
// start with one line that points to PostgreSQL, the lock goes with the process (kill -9
// leaves nothing that blocks the next start), and a second server from the same data folder
// on another database never overwrites the first one's bootstrap token file.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SqliteDatabaseInUse } from '../../server/store/sqlite-lock.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { api, killServers, serve } from '../helpers/serve.js';
import { startTestServer } from '../helpers/server.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterEach(killServers);
afterAll(removeTempDirs);

/** serveToExit with a longer bound: a refused start still loads the whole server first, which on a loaded machine took over serveToExit's 30 s. */
const serveToExit = (args: string[]) =>
  runCliProcess(['serve', ...args], Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('EDGEFORM_')).map((k) => [k, undefined])), { timeoutMs: 120_000 });

describe('one server per SQLite database', () => {
  it('a second edgeform serve on the same database file is refused with one line naming PostgreSQL; after a kill -9 of the first, the next one starts', async () => {
    // A data folder that does not exist yet: the lock's file is made in it as the database is.
    const dir = path.join(tempDir(), 'data', 'new');
    const first = await serve(['--data-dir', dir]);
    const token = fs.readFileSync(path.join(dir, 'bootstrap-token'), 'utf8').trim();

    const second = await serveToExit(['--data-dir', dir, '--port', '0']);
    expect(second.code, second.stderr).toBe(1);
    const lines = second.stderr.trim().split('\n');
    expect(lines, second.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^Error: another edgeform server is running on the SQLite database .*edgeform\.db .*PostgreSQL/);
    expect(second.stdout).not.toMatch(/listening/);
    // The same file by another name (--database) is the same database.
    const named = await serveToExit(['--data-dir', tempDir(), '--port', '0', '--database', `file:${path.join(dir, '.', 'edgeform.db')}`]);
    expect(named.code, named.stderr).toBe(1);
    expect(named.stderr).toMatch(/another edgeform server is running/);
    // The first one serves on, untouched.
    expect((await api(`${first.url}/ip_policies`, token)).status).toBe(200);

    first.child.kill('SIGKILL');
    await first.exited;
    const next = await serve(['--data-dir', dir]);
    expect((await api(`${next.url}/ip_policies`, token)).status).toBe(200);
    next.child.kill('SIGTERM');
    expect(await next.exited).toBe(0);
  }, 120_000);

  it('in one process too: a second server on the database is refused, and a stopped one lets the next start', async () => {
    const s = await startTestServer();
    await expect(startTestServer({ dir: s.dir })).rejects.toBeInstanceOf(SqliteDatabaseInUse);
    await s.restart();
    expect((await s.get('/ip_policies')).status).toBe(200);
    await s.close();
  });

  it("a second server on another database from the same data folder leaves the first one's bootstrap-token as it is", async () => {
    const dir = tempDir();
    const first = await serve(['--data-dir', dir]);
    const tokenFile = path.join(dir, 'bootstrap-token');
    const token = fs.readFileSync(tokenFile, 'utf8');
    const other = await serve(['--data-dir', dir, '--database', `file:${path.join(dir, 'other.db')}`]);
    expect(fs.readFileSync(tokenFile, 'utf8')).toBe(token);
    expect(other.lines().some((l) => /bootstrap-token already holds another database's first token and was left as it is/.test(l.msg))).toBe(true);
    // Its own token is shown once on stderr, and works there.
    await other.waitFor(/First API key token \(shown once\): \S+/, 'stderr');
    const otherToken = /First API key token \(shown once\): (\S+)/.exec(other.stderr())![1];
    expect(otherToken).not.toBe(token.trim());
    expect((await api(`${other.url}/ip_policies`, otherToken)).status).toBe(200);
    expect((await api(`${first.url}/ip_policies`, token.trim())).status).toBe(200);
    for (const s of [first, other]) {
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
    }
  }, 120_000);
});
