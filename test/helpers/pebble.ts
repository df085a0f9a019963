// Let's Encrypt's ACME test server, Pebble (Debian's `pebble` package: /usr/bin/pebble and
// /usr/bin/pebble-challtestsrv, no config or certificates shipped), on loopback: its own TLS
// certificate and config made here in a temp folder, pebble-challtestsrv as its DNS (every
// A query answers 127.0.0.1, no AAAA), and its validation ports pointed at the listeners
// that stand for public ports 80 and 443. Pebble keeps its habits: 5% of nonces refused.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { Pki } from './pki.js';
import { freePort } from './ports.js';
import { tempDir } from './temp.js';
import { until } from './wait.js';

export const pebbleInstalled = fs.existsSync('/usr/bin/pebble') && fs.existsSync('/usr/bin/pebble-challtestsrv');

export interface Pebble {
  /** The directory URL (https, Pebble's own certificate). */
  directory: string;
  /** The root Pebble's own TLS certificate chains to (for --acme-ca-file). */
  caFile: string;
  /** Where it validates HTTP-01 and TLS-ALPN-01. */
  httpPort: number;
  tlsPort: number;
  /** Pebble's issuing root, from its management endpoint /roots/0 (what a client trusts). */
  root(): Promise<string>;
  log(): string;
  stop(): void;
  /** Starts Pebble again on the same ports (its roots are new: Pebble keeps nothing). */
  restart(): Promise<void>;
}

const running: ChildProcess[] = [];

/** Stops every Pebble a test left running (call from afterAll). */
export function stopPebbles() {
  for (const c of running.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

function get(url: string, ca: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    https.get(url, { ca }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    }).on('error', reject).setTimeout(5000, function (this: { destroy(e: Error): void }) { this.destroy(new Error(`${url}: no answer in 5 s`)); });
  });
}

/**
 * Pebble with `httpPort`/`tlsPort` its validation targets and certificates valid for
 * `validitySeconds` (config `certificateValidityPeriod`). `env` adds Pebble's variables
 * (PEBBLE_VA_ALWAYS_VALID=1 for a test not about validation).
 */
export async function startPebble(o: { httpPort: number; tlsPort: number; validitySeconds?: number; env?: Record<string, string> }): Promise<Pebble> {
  if (!pebbleInstalled) throw new Error('Pebble is not installed: apt-get install -y pebble (Debian\'s package, /usr/bin/pebble and /usr/bin/pebble-challtestsrv; .ci/run installs it)');
  const dir = tempDir('edgeform-pebble-');
  const pki = new Pki();
  const ca = pki.issue('p256', { subject: [['CN', 'pebble test TLS root']], ca: true, keyUsage: ['critical', 'keyCertSign', 'cRLSign'] });
  const leaf = pki.issue('p256', { subject: [['CN', 'localhost']], sans: ['DNS:localhost', 'IP:127.0.0.1'], ca: false, keyUsage: ['digitalSignature'], extendedKeyUsage: ['serverAuth'] }, ca);
  fs.writeFileSync(path.join(dir, 'cert.pem'), leaf.cert + ca.cert);
  fs.writeFileSync(path.join(dir, 'key.pem'), leaf.key);
  const caFile = path.join(dir, 'ca.pem');
  fs.writeFileSync(caFile, ca.cert);
  const [listen, management, dns, dnsManagement] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const config = {
    pebble: {
      listenAddress: `127.0.0.1:${listen}`,
      managementListenAddress: `127.0.0.1:${management}`,
      certificate: path.join(dir, 'cert.pem'),
      privateKey: path.join(dir, 'key.pem'),
      httpPort: o.httpPort,
      tlsPort: o.tlsPort,
      ocspResponderURL: '',
      externalAccountBindingRequired: false,
      ...(o.validitySeconds ? { certificateValidityPeriod: o.validitySeconds } : {}),
    },
  };
  fs.writeFileSync(path.join(dir, 'pebble-config.json'), JSON.stringify(config));
  let output = '';
  const dnsServer = spawn('/usr/bin/pebble-challtestsrv', ['-dns01', `127.0.0.1:${dns}`, '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${dnsManagement}`, '-defaultIPv4', '127.0.0.1', '-defaultIPv6', ''], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.push(dnsServer);
  dnsServer.stdout!.on('data', (c) => (output += c));
  dnsServer.stderr!.on('data', (c) => (output += c));
  let child: ChildProcess;
  const directory = `https://127.0.0.1:${listen}/dir`;
  const caPem = ca.cert;
  const start = async () => {
    child = spawn('/usr/bin/pebble', ['-config', path.join(dir, 'pebble-config.json'), '-dnsserver', `127.0.0.1:${dns}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', ...o.env },
    });
    running.push(child);
    child.stdout!.on('data', (c) => (output += c));
    child.stderr!.on('data', (c) => (output += c));
    await until(async () => (await get(directory, caPem).catch(() => ({ status: 0 }))).status === 200, 30_000, () => `Pebble did not answer at ${directory}:\n${output}`);
  };
  await start();
  return {
    directory,
    caFile,
    httpPort: o.httpPort,
    tlsPort: o.tlsPort,
    async root() {
      const r = await get(`https://127.0.0.1:${management}/roots/0`, caPem);
      if (r.status !== 200) throw new Error(`Pebble /roots/0: ${r.status}`);
      return r.text;
    },
    log: () => output,
    stop() {
      child.kill('SIGKILL');
    },
    async restart() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await new Promise((r) => child.once('exit', r));
      }
      await start();
    },
  };
}
