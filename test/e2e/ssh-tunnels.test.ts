// Issue 31: OpenSSH's own `ssh -R` as an agent, against a real `edgeform serve --ssh-listen
// 127.0.0.1:0 --ingress 443=...`: a key registered as an SSH credential, the command the
// service documents (`http --url …`), the printed URL answered through the ingress, the session
// listed with transport ssh while connected and gone after, stop, restart refused, an acl
// refusal and an unregistered key refused, each in words on the user's terminal.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { twoFreePorts } from '../helpers/ports.js';
import Database from 'better-sqlite3';
import { killServers, serve, type Serving } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

let ing: Ingress;
let sshPort: number;
let tcpFirst: number;
let fingerprint: string;
let ca: string;
let upstream: http.Server;
let upstreamPort: number;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-ssh-R-'));
const children: ChildProcess[] = [];

/** A new ed25519 key pair made by ssh-keygen: the private key file and the public key line. */
async function makeKey(name: string): Promise<{ file: string; pub: string }> {
  const file = path.join(dir, name);
  await new Promise<void>((resolve, reject) => {
    const p = spawn('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `${name}@test`, '-f', file], { stdio: 'ignore' });
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`ssh-keygen exited ${code}`))));
  });
  return { file, pub: fs.readFileSync(`${file}.pub`, 'utf8').trim() };
}

interface SshRun { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number> }

/** `ssh -R 0:localhost:<upstream> v2@127.0.0.1 <command…>` with the given key, non-interactive, host key pinned. */
function ssh(key: string, command: string[], forward: string | null = `0:localhost:${upstreamPort}`): SshRun {
  const known = path.join(dir, 'known_hosts');
  const args = [
    '-p', String(sshPort), '-i', key, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${known}`,
    '-o', 'StrictHostKeyChecking=yes', '-o', 'ExitOnForwardFailure=yes', '-o', 'ServerAliveInterval=5',
    ...(forward ? ['-R', forward] : []), 'v2@127.0.0.1', ...command,
  ];
  const child = spawn('ssh', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (err += c));
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
  return { child, out: () => out, err: () => err, exited };
}

/** Resolves with the exit code, or fails after `ms`. */
function exitWithin(run: SshRun, ms = 20_000): Promise<number> {
  return Promise.race([run.exited, new Promise<number>((_, reject) => setTimeout(() => reject(new Error(`ssh did not exit within ${ms} ms\nstdout: ${run.out()}\nstderr: ${run.err()}`)), ms).unref())]);
}

const sessions = async () => (await ing.api('GET', '/tunnel_sessions')).body.tunnel_sessions as any[];

beforeAll(async () => {
  upstream = http.createServer((req, res) => res.end(`upstream ${req.method} ${req.url} host=${req.headers.host} added=${req.headers['x-added'] ?? ''}`));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  tcpFirst = await twoFreePorts();
  ing = await startIngress([443], {}, ['--ssh-listen', '127.0.0.1:0', '--agent-tcp-ports', `${tcpFirst}-${tcpFirst + 1}`]);
  const line = ing.lines().find((l) => typeof l.ssh_listen === 'string');
  if (!line) throw new Error(`no ssh listener line in ${JSON.stringify(ing.lines())}`);
  sshPort = Number(String(line.ssh_listen).split(':').pop());
  fingerprint = line.host_key_fingerprint as string;
  ca = fs.readFileSync(path.join(ing.dataDir, 'ingress-ca.pem'), 'utf8');
  // The host key is pinned as a user would after checking the fingerprint printed at start.
  const scan = await new Promise<string>((resolve, reject) => {
    const p = spawn('ssh-keyscan', ['-p', String(sshPort), '-t', 'ed25519', '127.0.0.1'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let text = '';
    p.stdout.on('data', (c) => (text += c));
    p.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`ssh-keyscan exited ${code}`))));
  });
  fs.writeFileSync(path.join(dir, 'known_hosts'), scan);
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  upstream?.close();
  killServers();
  removeTempDirs();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('ssh -R against edgeform serve --ssh-listen', () => {
  it('prints the host key fingerprint at start, the one OpenSSH sees', async () => {
    expect(fingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
    const r = await new Promise<string>((resolve) => {
      const p = spawn('ssh-keygen', ['-l', '-f', path.join(dir, 'known_hosts')], { stdio: ['ignore', 'pipe', 'ignore'] });
      let t = '';
      p.stdout.on('data', (c) => (t += c));
      p.on('exit', () => resolve(t));
    });
    expect(r).toContain(fingerprint);
  });

  it('serves an http tunnel at the URL it prints, lists the session with transport ssh, and stop ends it', async () => {
    const key = await makeKey('alice');
    const cred = await ing.api('POST', '/ssh_credentials', { public_key: key.pub, acl: ['bind:alice.example.com'], description: 'alice' });
    expect(cred.status).toBe(201);
    const run = ssh(key.file, ['http', '--url', 'alice.example.com', '--request-header-add', "'x-added: by ssh'"]);
    // No --ingress-http here: an http tunnel is served on the TLS listener, and its URL says so.
    await until(() => /Forwarding https:\/\/alice\.example\.com/.test(run.out()), 20_000, () => `no Forwarding line\nstdout: ${run.out()}\nstderr: ${run.err()}`);
    const r = await edgeRequest({ port: ing.port(443), host: 'alice.example.com', path: '/hello', ca });
    expect(r.status).toBe(200);
    expect(r.text).toBe('upstream GET /hello host=alice.example.com added=by ssh');
    await until(() => /GET \/hello 200/.test(run.out()), 10_000, () => `no request line\nstdout: ${run.out()}`);

    const s = (await sessions()).find((x) => x.credential.id === cred.body.id);
    expect(s).toMatchObject({ transport: 'ssh', ip: '127.0.0.1', region: 'local' });
    expect(s.agent_version).toMatch(/^OpenSSH_/);
    expect(s.credential.uri).toMatch(new RegExp(`/ssh_credentials/${cred.body.id}$`));
    const tunnels = (await ing.api('GET', '/tunnels')).body.tunnels as any[];
    expect(tunnels.find((t) => t.tunnel_session.id === s.id)).toMatchObject({ proto: 'http', public_url: 'https://alice.example.com' });

    const restart = await ing.api('POST', `/tunnel_sessions/${s.id}/restart`);
    expect(restart.status).toBe(409);
    expect(restart.body.error_code).toBe('ERR_SERVICE_332');
    const stop = await ing.api('POST', `/tunnel_sessions/${s.id}/stop`);
    expect(stop.status).toBe(204);
    expect(await exitWithin(run)).toBe(0);
    expect(run.err()).toMatch(/stopped by the server's API/);
    await until(async () => !(await sessions()).some((x) => x.id === s.id), 10_000, () => 'the stopped session is still listed');
    // Nothing serves the name any more: the 404 page (a port with no edge at all answers it too, issue 29).
    expect((await edgeRequest({ port: ing.port(443), host: 'alice.example.com', path: '/hello', ca })).status).toBe(404);
  });

  it('ends the session when the client goes, and takes the -R name as the hostname', async () => {
    const key = await makeKey('bob');
    await ing.api('POST', '/ssh_credentials', { public_key: key.pub });
    const run = ssh(key.file, ['https'], `bob.example.com:443:localhost:${upstreamPort}`);
    await until(() => /Forwarding https:\/\/bob\.example\.com/.test(run.out()), 20_000, () => `no Forwarding line\nstdout: ${run.out()}\nstderr: ${run.err()}`);
    expect((await edgeRequest({ port: ing.port(443), host: 'bob.example.com', path: '/x', ca })).text).toBe('upstream GET /x host=bob.example.com added=');
    run.child.kill('SIGTERM');
    await until(async () => !(await ing.api('GET', '/tunnels')).body.tunnels.some((t: any) => t.public_url === 'https://bob.example.com'), 10_000, () => 'the tunnel outlived its ssh client');
  });

  it('serves a tcp tunnel on a port of --agent-tcp-ports, printed as tcp://host:port', async () => {
    const echo = net.createServer((c) => c.pipe(c));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    const key = await makeKey('gina');
    await ing.api('POST', '/ssh_credentials', { public_key: key.pub });
    const run = ssh(key.file, ['tcp'], `0:localhost:${(echo.address() as AddressInfo).port}`);
    await until(() => /Forwarding tcp:\/\/edgeform\.localhost:\d+/.test(run.out()), 20_000, () => `no Forwarding line\nstdout: ${run.out()}\nstderr: ${run.err()}`);
    const port = Number(/tcp:\/\/edgeform\.localhost:(\d+)/.exec(run.out())![1]);
    expect([tcpFirst, tcpFirst + 1]).toContain(port);
    const echoed = await new Promise<string>((resolve, reject) => {
      const c = net.connect(port, '127.0.0.1', () => c.write('hello over ssh tcp'));
      let got = '';
      c.on('data', (d) => {
        got += d;
        if (got.length >= 18) c.end();
      });
      c.on('close', () => resolve(got));
      c.on('error', reject);
      setTimeout(() => reject(new Error(`no echo within 10 s (got ${JSON.stringify(got)})`)), 10_000).unref();
    });
    expect(echoed).toBe('hello over ssh tcp');
    run.child.kill('SIGTERM');
    echo.close();
  });

  it('refuses, in words and with exit status 2, a hostname the acl does not allow, an unknown command and a missing -R', async () => {
    const key = await makeKey('carol');
    await ing.api('POST', '/ssh_credentials', { public_key: key.pub, acl: ['bind:carol.example.com'] });
    const acl = ssh(key.file, ['http', '--url', 'payments.example.com']);
    expect(await exitWithin(acl)).toBe(2);
    expect(acl.err()).toMatch(/does not allow binding hostname payments\.example\.com.*ERR_SERVICE_212/);
    const unknown = ssh(key.file, ['ftp']);
    expect(await exitWithin(unknown)).toBe(2);
    expect(unknown.err()).toMatch(/"ftp" is not a tunnel type/);
    expect(unknown.err()).toMatch(/ssh -p PORT -R 0:localhost:LOCAL_PORT/);
    const flag = ssh(key.file, ['http', '--basic-auth', 'a:b']);
    expect(await exitWithin(flag)).toBe(2);
    expect(flag.err()).toMatch(/--basic-auth is not supported over ssh/);
    expect((await sessions()).filter((x) => x.transport === 'ssh')).toEqual([]);
  });

  it('refuses a key no SSH credential holds, and a deleted credential', async () => {
    const stranger = await makeKey('stranger');
    const run = ssh(stranger.file, ['http']);
    expect(await exitWithin(run)).toBe(255);
    expect(run.err()).toMatch(/Permission denied \(publickey/);
    const key = await makeKey('dave');
    const cred = await ing.api('POST', '/ssh_credentials', { public_key: key.pub });
    expect((await ing.api('DELETE', `/ssh_credentials/${cred.body.id}`)).status).toBe(204);
    const gone = ssh(key.file, ['http']);
    expect(await exitWithin(gone)).toBe(255);
  });
});

describe('bad input over ssh', () => {
  it('closes a connection that tries more than 10 keys, and refuses a second -R while the first serves on', async () => {
    const keys = await Promise.all(Array.from({ length: 12 }, (_, i) => makeKey(`flood${i}`)));
    const known = path.join(dir, 'known_hosts');
    const flood = spawn('ssh', ['-p', String(sshPort), ...keys.flatMap((k) => ['-i', k.file]), '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${known}`, 'v2@127.0.0.1', 'http'], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(flood);
    let err = '';
    flood.stderr.on('data', (c) => (err += c));
    const code = await new Promise<number>((resolve) => flood.on('exit', (c) => resolve(c ?? -1)));
    expect(code).toBe(255);
    expect(err).toMatch(/Connection closed|Received disconnect|Too many authentication failures/);

    const key = await makeKey('frank');
    await ing.api('POST', '/ssh_credentials', { public_key: key.pub, acl: ['bind:frank.example.com'] });
    const both = spawn('ssh', ['-p', String(sshPort), '-i', key.file, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${known}`,
      '-R', `0:localhost:${upstreamPort}`, '-R', `frank.example.com:443:localhost:${upstreamPort}`, 'v2@127.0.0.1', 'http', '--url', 'frank.example.com'], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(both);
    let out = '';
    let bothErr = '';
    both.stdout.on('data', (c) => (out += c));
    both.stderr.on('data', (c) => (bothErr += c));
    await until(() => /Forwarding https:\/\/frank\.example\.com/.test(out), 20_000, () => `no Forwarding line\nstdout: ${out}\nstderr: ${bothErr}`);
    await until(() => /only one -R forward per connection|remote port forwarding failed/.test(bothErr), 10_000, () => `the second -R was not refused\nstderr: ${bothErr}`);
    // The first forward still serves.
    expect((await edgeRequest({ port: ing.port(443), host: 'frank.example.com', path: '/one', ca })).text).toBe('upstream GET /one host=frank.example.com added=');
    both.kill('SIGTERM');
  });
});

describe('the SSH host key', () => {
  const fingerprintOf = (s: Serving) => s.lines().find((l) => typeof l.host_key_fingerprint === 'string')?.host_key_fingerprint as string;
  const sshArgs = ['--ssh-listen', '127.0.0.1:0'];

  it('is made once and kept sealed in the database: the same after a restart and after the secret key is rotated', async () => {
    const data = tempDir('edgeform-ssh-hostkey-');
    const first = await serve(['--data-dir', data, ...sshArgs]);
    await first.waitFor(/ssh listener/);
    const made = fingerprintOf(first);
    expect(made).toMatch(/^SHA256:/);
    expect(first.stdout()).toMatch(/made the SSH host key/);
    // Not in the database in the clear: the sealed setting holds no OpenSSH key text.
    const db = new Database(path.join(data, 'edgeform.db'), { readonly: true });
    const rows = db.prepare("SELECT key, value FROM Setting WHERE key = 'sealed:ssh_host_key'").all() as { key: string; value: string }[];
    db.close();
    expect(rows).toHaveLength(1);
    expect(rows[0].value).not.toMatch(/OPENSSH|PRIVATE/);
    first.child.kill('SIGTERM');
    await first.exited;

    // `edgeform admin ssh-host-key` shows the same fingerprint, from the database, without the secret key.
    const shown = await runCli(['admin', 'ssh-host-key', '--data-dir', data]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout.trim()).toBe(made);
    const again = await serve(['--data-dir', data, ...sshArgs]);
    await again.waitFor(/ssh listener/);
    expect(fingerprintOf(again)).toBe(made);
    expect(again.stdout()).not.toMatch(/made the SSH host key/);
    again.child.kill('SIGTERM');
    await again.exited;

    // Rotation: the old key file moved aside and named as the previous key; a new one is made.
    const old = path.join(data, 'old.key');
    fs.renameSync(path.join(data, 'secret.key'), old);
    const rotated = await serve(['--data-dir', data, ...sshArgs], { EDGEFORM_SECRET_KEY_PREVIOUS_FILE: old });
    await rotated.waitFor(/ssh listener/);
    expect(fingerprintOf(rotated)).toBe(made);
    rotated.child.kill('SIGTERM');
    await rotated.exited;
    const after = await serve(['--data-dir', data, ...sshArgs]);
    await after.waitFor(/ssh listener/);
    expect(fingerprintOf(after)).toBe(made);
  }, 240_000);
});

describe('ssh -R with an OpenSSH user certificate signed by an SSH CA of the server', () => {
  it('logs in for the user its principal names, within its window and with permit-port-forwarding; the session\'s credential is the CA', async () => {
    const owner = (await ing.api('GET', '/api_keys')).body.keys[0].owner_id as string;
    const sshCa = await ing.api('POST', '/ssh_certificate_authorities', { private_key_type: 'ed25519', description: 'ssh logins' });
    expect(sshCa.status).toBe(201);
    const key = await makeKey('erin');
    const sign = (body: Record<string, unknown>) => ing.api('POST', '/ssh_user_certificates', { ssh_certificate_authority_id: sshCa.body.id, public_key: key.pub, ...body });
    const cert = await sign({ principals: [owner], extensions: { 'permit-port-forwarding': '' } });
    expect(cert.status).toBe(201);
    fs.writeFileSync(`${key.file}-cert.pub`, `${cert.body.certificate}\n`);
    const run = ssh(key.file, ['http', '--url', 'erin.example.com']);
    await until(() => /Forwarding https:\/\/erin\.example\.com/.test(run.out()), 20_000, () => `no Forwarding line\nstdout: ${run.out()}\nstderr: ${run.err()}`);
    expect((await edgeRequest({ port: ing.port(443), host: 'erin.example.com', path: '/c', ca })).text).toBe('upstream GET /c host=erin.example.com added=');
    const s = (await sessions()).find((x) => x.credential.id === sshCa.body.id);
    expect(s).toMatchObject({ transport: 'ssh' });
    expect(s.credential.uri).toMatch(new RegExp(`/ssh_certificate_authorities/${sshCa.body.id}$`));
    // Still held after the credential checks that run every 400 ms (an SSH CA has no owner of its own).
    await new Promise((r) => setTimeout(r, 1200));
    expect((await sessions()).some((x) => x.id === s.id)).toBe(true);
    run.child.kill('SIGTERM');
    await exitWithin(run).catch(() => -1);

    // Refused: no permit-port-forwarding; a principal that is nobody; a certificate already expired.
    for (const body of [
      { principals: [owner], extensions: { 'permit-pty': '' } },
      { principals: ['root'], extensions: { 'permit-port-forwarding': '' } },
      { principals: [owner], extensions: { 'permit-port-forwarding': '' }, valid_after: '2020-01-01T00:00:00Z', valid_until: '2020-01-02T00:00:00Z' },
    ]) {
      const bad = await sign(body);
      expect(bad.status, JSON.stringify(bad.body)).toBe(201);
      fs.writeFileSync(`${key.file}-cert.pub`, `${bad.body.certificate}\n`);
      const refused = ssh(key.file, ['http', '--url', 'erin.example.com']);
      expect(await exitWithin(refused), JSON.stringify(body)).toBe(255);
    }
  });
});
