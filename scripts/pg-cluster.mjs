// A throwaway PostgreSQL cluster on 127.0.0.1, for migration authoring and for tests.
// PostgreSQL refuses to run as root, so the cluster runs as the `postgres` user when we are root.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

function asPostgres(cmd, args) {
  if (process.getuid?.() === 0) execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'pipe' });
  else execFileSync(cmd, args, { stdio: 'pipe' });
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export function postgresAvailable() {
  try {
    execFileSync('initdb', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a cluster and returns { url(database), createDatabase(name), stop() }, and for
 * outage tests halt() (a fast shutdown that keeps the data) and resume() (the same cluster on
 * the same port again). `settings` are extra server settings, such as { max_connections: 12 }.
 */
export async function startPostgres({ settings = {} } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-pg-'));
  fs.chmodSync(dir, 0o777);
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres:postgres', dir]);
  const data = path.join(dir, 'data');
  asPostgres('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
  const port = await freePort();
  const extra = Object.entries(settings).map(([k, v]) => ` -c ${k}=${v}`).join('');
  const start = () => asPostgres('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-o', `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off${extra}`, 'start']);
  start();
  const { default: pg } = await import('pg');
  const url = (db) => `postgresql://postgres@127.0.0.1:${port}/${db}`;
  return {
    port,
    url,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      await client.query(`CREATE DATABASE "${name}"`);
      await client.end();
      return url(name);
    },
    /** A fast shutdown (what a restart or a failover looks like to a client): every connection is terminated; the data stays. */
    halt() {
      asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
    },
    /** Starts the halted cluster again, on the same port. */
    resume() {
      start();
    },
    stop() {
      try {
        // A halted cluster is stopped already.
        if (fs.existsSync(path.join(data, 'postmaster.pid'))) asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
