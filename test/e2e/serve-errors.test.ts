// `edgeform serve` that cannot start, as an operator meets it: one line on stderr that names
// the setting to change, no stack trace, exit 2 for a bad flag or environment value (a
// usage error, as the README's exit codes say) and 1 for what the machine refused.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveToExit } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

const dir = tempDir('edgeform-serve-errors-');
const aFile = path.join(dir, 'a-file');
fs.writeFileSync(aFile, 'not a folder\n');
const notADatabase = path.join(dir, 'not.db');
fs.writeFileSync(notADatabase, 'x'.repeat(200));
const badKeyFile = path.join(dir, 'bad.key');
fs.writeFileSync(badKeyFile, 'too short\n');

/** A port something else already listens on. */
let busy: net.Server;
let busyPort = 0;
/** One on the address `localhost` resolves to here (what a listener given that name binds). */
let busyLocal: net.Server;
let busyLocalPort = 0;
beforeAll(async () => {
  busy = net.createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  busyPort = (busy.address() as net.AddressInfo).port;
  const { address } = await (await import('node:dns/promises')).lookup('localhost');
  busyLocal = net.createServer();
  await new Promise<void>((r) => busyLocal.listen(0, address, r));
  busyLocalPort = (busyLocal.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise((r) => busy.close(r));
  await new Promise((r) => busyLocal.close(r));
  removeTempDirs();
});

const serve = (args: string[], env: Record<string, string> = {}) => serveToExit(['--data-dir', path.join(dir, 'data'), ...args], env);

interface Case {
  case: string;
  args: () => string[];
  env?: Record<string, string>;
  code: number;
  /** What the line must say: the cause and the setting to change. */
  says: RegExp[];
}

const cases: Case[] = [
  { case: 'a port out of range is a usage error', args: () => ['--port', '70000'], code: 2, says: [/--port \/ EDGEFORM_PORT must be an integer from 0 to 65535/, /edgeform serve --help/] },
  { case: 'a port from the environment is judged the same way', args: () => [], env: { EDGEFORM_PORT: 'eighty' }, code: 2, says: [/EDGEFORM_PORT must be an integer/] },
  { case: 'a rate limit that is not a number', args: () => ['--port', '0', '--api-rate-limit', 'lots'], code: 2, says: [/--api-rate-limit/] },
  { case: 'a public URL that is not a URL would prefix every uri the API returns', args: () => ['--port', '0', '--public-url', 'api.example.com'], code: 2, says: [/--public-url \/ EDGEFORM_PUBLIC_URL must be an http\(s\) URL/] },
  { case: 'a database URL of another engine', args: () => ['--port', '0', '--database', 'mysql://root@localhost/edgeform'], code: 2, says: [/unsupported database URL/, /file:<path>.* for SQLite, or postgresql:\/\//] },
  { case: 'a port another program holds', args: () => ['--port', String(busyPort)], code: 1, says: [/already in use/, /--port \/ EDGEFORM_PORT \(0 picks a free one\)/] },
  // Issue 29: a busy ingress port named the API's address and --port.
  { case: 'an ingress port another program holds names --ingress, not --port', args: () => ['--port', '0', '--ingress', `443=127.0.0.1:${busyPort}`], code: 1, says: [/cannot listen on 127\.0\.0\.1:[1-9]\d* for the ingress \(--ingress \/ EDGEFORM_INGRESS 443=127\.0\.0\.1:[1-9]\d*\): the port is already in use/, /another ADDRESS:PORT in --ingress/] },
  { case: 'an ingress listener given as localhost on a busy port names --ingress too', args: () => ['--port', '0', '--ingress', `443=localhost:${busyLocalPort}`], code: 1, says: [/cannot listen on localhost:[1-9]\d* for the ingress \(--ingress \/ EDGEFORM_INGRESS 443=localhost:[1-9]\d*\)/, /already in use/] },
  { case: 'a busy plain-HTTP ingress port names --ingress-http', args: () => ['--port', '0', '--ingress-http', `80=127.0.0.1:${busyPort}`], code: 1, says: [/cannot listen on 127\.0\.0\.1:[1-9]\d* for the ingress \(--ingress-http \/ EDGEFORM_INGRESS_HTTP 80=127\.0\.0\.1:[1-9]\d*\): the port is already in use/] },
  { case: 'a public port named by --ingress and --ingress-http is a usage error', args: () => ['--port', '0', '--ingress', '80=127.0.0.1:0', '--ingress-http', '80=127.0.0.1:0'], code: 2, says: [/public port 80 is named by --ingress \(TLS\) and --ingress-http \(plain HTTP\)/] },
  { case: 'an --ingress-http value not of the form', env: { EDGEFORM_INGRESS_HTTP: '80:8080' }, args: () => ['--port', '0'], code: 2, says: [/--ingress-http \/ EDGEFORM_INGRESS_HTTP takes PUBLIC_PORT=ADDRESS:PORT, such as 80=127\.0\.0\.1:8080/] },
  { case: 'a host that is not an address of this machine', args: () => ['--port', '0', '--host', '192.0.2.1'], code: 1, says: [/cannot listen on 192\.0\.2\.1/, /--host \/ EDGEFORM_HOST/] },
  { case: 'a data folder that cannot be created (a file is in the way)', args: () => ['--port', '0', '--data-dir', path.join(aFile, 'data')], code: 1, says: [/cannot write .*a-file/, /--data-dir \/ EDGEFORM_DATA_DIR/] },
  { case: 'a bootstrap token file that cannot be written is named by its own setting', args: () => ['--port', '0', '--data-dir', path.join(dir, 'token-data')], env: { EDGEFORM_BOOTSTRAP_TOKEN_FILE: path.join(aFile, 'token') }, code: 1, says: [/cannot write .*a-file/, /choose EDGEFORM_BOOTSTRAP_TOKEN_FILE$/m] },
  { case: 'a database file that is not SQLite', args: () => ['--port', '0', '--database', `file:${notADatabase}`], code: 1, says: [/not a SQLite database/, /--database \/ EDGEFORM_DATABASE_URL/] },
  // A start waits --database-start-timeout for a PostgreSQL still coming up (docs/operations.md); one second here.
  { case: 'PostgreSQL that is not running (port 1 refuses), password kept out of the line', args: () => ['--port', '0', '--database-start-timeout', '1', '--database', 'postgresql://edgeform:hunter2@127.0.0.1:1/edgeform'], code: 1, says: [/PostgreSQL at postgresql:\/\/127\.0\.0\.1:1\/edgeform did not answer within 1 s/, /is it running/, /--database-start-timeout \/ EDGEFORM_DATABASE_START_TIMEOUT/, /--database \/ EDGEFORM_DATABASE_URL/] },
  { case: 'a key file that holds no key', args: () => ['--port', '0'], env: { EDGEFORM_SECRET_KEY_FILE: badKeyFile }, code: 1, says: [/bad\.key \(EDGEFORM_SECRET_KEY_FILE\) does not hold a valid key/, /64 hex digits/] },
  { case: 'a bootstrap token of one character', args: () => ['--port', '0'], env: { EDGEFORM_BOOTSTRAP_TOKEN: 'a' }, code: 2, says: [/^Error: EDGEFORM_BOOTSTRAP_TOKEN is too weak: it must be at least 32 characters/] },
  { case: 'a bootstrap token one character short of 32', args: () => ['--port', '0'], env: { EDGEFORM_BOOTSTRAP_TOKEN: 'Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4' }, code: 2, says: [/EDGEFORM_BOOTSTRAP_TOKEN is too weak/] },
  { case: 'a long bootstrap token of few characters', args: () => ['--port', '0'], env: { EDGEFORM_BOOTSTRAP_TOKEN: 'ab'.repeat(30) }, code: 2, says: [/EDGEFORM_BOOTSTRAP_TOKEN is too weak/] },
  { case: 'a bootstrap token with characters a bearer token cannot carry', args: () => ['--port', '0'], env: { EDGEFORM_BOOTSTRAP_TOKEN: 'Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4Gh 7' }, code: 2, says: [/EDGEFORM_BOOTSTRAP_TOKEN is too weak/] },
  { case: 'a secret key in the environment that is not one', args: () => ['--port', '0'], env: { EDGEFORM_SECRET_KEY: 'abc' }, code: 1, says: [/^Error: EDGEFORM_SECRET_KEY is not a valid key/m] },
];

describe('edgeform serve that cannot start', () => {
  it.each(cases)('$case', async (c) => {
    const r = await serve(c.args(), c.env);
    expect(r.code, r.stderr).toBe(c.code);
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^Error: /);
    for (const re of c.says) expect(r.stderr).toMatch(re);
    if (c.args().some((a) => a.startsWith('--ingress'))) expect(r.stderr).not.toMatch(/--port|EDGEFORM_PORT/);
    // No stack trace, no password, and nothing claiming it is listening.
    expect(r.stderr).not.toMatch(/^\s+at /m);
    expect(r.stderr).not.toContain('hunter2');
    expect(r.stdout).not.toMatch(/listening/);
    // A refused token is not repeated back.
    if ((c.env?.EDGEFORM_BOOTSTRAP_TOKEN?.length ?? 0) > 8) expect(r.stderr).not.toContain(c.env!.EDGEFORM_BOOTSTRAP_TOKEN);
  });
});
