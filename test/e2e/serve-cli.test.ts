// `edgeform serve` as a real process: the start-up banner and the bootstrap token, flags
// and environment, SIGTERM finishing in-flight requests, and a restart on the same data.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runCliProcess } from '../helpers/cli-process.js';
import { api, killServers, serve } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterEach(killServers);
afterAll(removeTempDirs);

describe('edgeform serve', () => {
  it('on an empty database: migrates, creates the admin and its key, prints where the token is, once', async () => {
    const dir = tempDir();
    const s = await serve(['--data-dir', dir]);
    const tokenFile = path.join(dir, 'bootstrap-token');
    await s.waitFor(/created the admin user/);
    await s.waitFor(/First API key token/, 'stderr');
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    expect(token).toMatch(/^[0-9A-Za-z]{43}$/);
    expect(fs.statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.join(dir, 'secret.key')).mode & 0o777).toBe(0o600);
    const msgs = s.lines().map((l) => l.msg);
    expect(msgs.some((m) => /^applied migrations: /.test(m))).toBe(true);
    expect(msgs.some((m) => m.includes(tokenFile))).toBe(true);
    expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // Printed once for the person starting the server, never in the JSON log on stdout.
    expect(s.stderr().split(token).length - 1).toBe(1);
    expect(s.stdout()).not.toContain(token);
    const r = await api(`${s.url}/ip_policies`, token);
    expect(r.status).toBe(200);
    await s.waitFor(/"path":"\/ip_policies"/);
    const line = s.lines().find((l) => l.path === '/ip_policies');
    expect(line).toMatchObject({ method: 'GET', status: 200, operation_id: r.headers.get('service-operation-id') });
    expect(fs.existsSync(path.join(dir, 'edgeform.db'))).toBe(true);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });

  it('SIGTERM: stops accepting, finishes the request in flight, closes the database and exits 0', async () => {
    const dir = tempDir();
    const s = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: 'sigterm-token-0123456789-abcdefghijklmnopqrst' });
    const { port } = new URL(s.url);
    // A first request warms the server (module loading, the database connection), so that the
    // one below reaches its handler well within the wait before SIGTERM, also on a busy machine.
    const warm = await fetch(`${s.url}/ip_policies`, { headers: { authorization: 'Bearer sigterm-token-0123456789-abcdefghijklmnopqrst', 'service-version': '2' } });
    expect(warm.status).toBe(200);
    // A request whose body arrives in two parts, with SIGTERM in between.
    const body = JSON.stringify({ description: 'in flight' });
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    let response = '';
    socket.on('data', (c) => { response += c; });
    const ended = new Promise((r) => socket.once('close', r));
    socket.write(
      `POST /ip_policies HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sigterm-token-0123456789-abcdefghijklmnopqrst\r\n` +
        `Service-Version: 2\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`,
    );
    await new Promise((r) => setTimeout(r, 300));
    s.child.kill('SIGTERM');
    await s.waitFor(/received SIGTERM/);
    // New connections are refused while the old request is still open (a kept-alive one would get the 503).
    const refused = await new Promise<boolean>((resolve) => {
      const probe = net.connect(Number(port), '127.0.0.1');
      probe.once('connect', () => { probe.destroy(); resolve(false); });
      probe.once('error', () => resolve(true));
    });
    expect(refused).toBe(true);
    socket.write(body.slice(5));
    await ended;
    expect(response).toMatch(/^HTTP\/1\.1 201 /);
    expect(response).toContain('"description":"in flight"');
    expect(await s.exited).toBe(0);
    expect(s.lines().at(-1).msg).toBe('stopped');

    // The same data directory again: no new admin, the token and the resource are still there.
    const again = await serve(['--data-dir', dir]);
    expect(again.lines().some((l) => /created the admin/.test(l.msg))).toBe(false);
    expect(again.lines().some((l) => /applied migrations/.test(l.msg))).toBe(false);
    const list = await (await api(`${again.url}/ip_policies`, 'sigterm-token-0123456789-abcdefghijklmnopqrst')).json();
    expect(list.ip_policies.map((p: { description: string }) => p.description)).toEqual(['in flight']);
    again.child.kill('SIGINT');
    expect(await again.exited).toBe(0);
  });

  it('standard output closed by its reader (serve | head): the next log line stops it as SIGTERM would, exit 0, no stack trace', async () => {
    const s = await serve(['--data-dir', tempDir()]);
    s.child.stdout!.destroy();
    // The request's access-log line is the next write to the closed pipe.
    await fetch(`${s.url}/ip_policies`).catch(() => undefined);
    expect(await s.exited).toBe(0);
    expect(s.stderr()).not.toMatch(/EPIPE|at .*\(/);
  });

  it('EDGEFORM_BOOTSTRAP_TOKEN supplies the first token, which is then never printed or written', async () => {
    const dir = tempDir();
    const token = 'gitops-token-abcdefghijklmnopqrstuvwxyz0123456789';
    const s = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: token });
    expect(fs.existsSync(path.join(dir, 'bootstrap-token'))).toBe(false);
    expect(s.stdout() + s.stderr()).not.toContain(token);
    expect((await api(`${s.url}/ip_policies`, token)).status).toBe(200);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });

  it('flags and their environment equivalents: database, public URL, rate limit', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'elsewhere', 'my.db');
    const token = 'flags-token-abcdefghijklmnopqrstuvwxyz0123456789';
    const s = await serve(['--data-dir', dir, '--database', `file:${db}`, '--public-url', 'https://api.example.com/'], {
      EDGEFORM_BOOTSTRAP_TOKEN: token,
      EDGEFORM_API_RATE_LIMIT: '2',
    });
    expect(s.url).toBe('https://api.example.com');
    expect(fs.existsSync(db)).toBe(true);
    const { port } = new URL(s.lines().find((l) => /listening/.test(l.msg)).msg.replace(/^.* on /, ''));
    const local = `http://127.0.0.1:${port}`;
    const created = await (await api(`${local}/ip_policies`, token, 'POST', {})).json();
    expect(created.uri).toBe(`https://api.example.com/ip_policies/${created.id}`);
    expect((await api(`${local}/ip_policies`, token)).status).toBe(200);
    const limited = await api(`${local}/ip_policies`, token);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });

  it('refuses a bad flag value with a message and a non-zero exit', async () => {
    const r = await runCliProcess(['serve', '--port', 'eighty'], { EDGEFORM_PORT: '' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/--port/);
  });

  it('--help lists the commands', async () => {
    const r = await runCliProcess(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/serve/);
    const serveHelp = await runCliProcess(['serve', '--help']);
    for (const flag of ['--host', '--port', '--database', '--public-url', '--api-rate-limit', 'EDGEFORM_BOOTSTRAP_TOKEN']) expect(serveHelp.stdout).toContain(flag);
  });
});
