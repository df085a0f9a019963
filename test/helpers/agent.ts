// Runs `edgeform agent` as a child process (test/helpers/cli-process.ts), as a user would,
// and waits on what it and the server say. Each agent is its own process group, so a
// restarted agent (which starts its successor as a child) is stopped whole.
import fs from 'node:fs';
import path from 'node:path';
import { startCli, type CliProcess } from './cli-process.js';
import type { TestServer } from './server.js';
import { tempDir } from './temp.js';

export type AgentProcess = CliProcess;

/** `edgeform agent ...` in its own process group; the API URL and token come only from `args` and `env`. */
export function startAgent(args: string[], env: Record<string, string | undefined> = {}): AgentProcess {
  return startCli(['agent', ...args], { EDGEFORM_AUTHTOKEN: undefined, EDGEFORM_API_URL: undefined, ...env }, { detached: true });
}

/** An agent config file (YAML) in a fresh temporary folder (removed by removeTempDirs); returns its path. */
export function agentConfigFile(yaml: string): string {
  const file = path.join(tempDir('edgeform-agent-'), 'agent.yml');
  fs.writeFileSync(file, yaml);
  return file;
}

/** A config naming one ephemeral tunnel on an explicit hostname. */
export const hostnameConfig = (hostname: string, name = 'site', proto = 'http') => agentConfigFile(`tunnels:\n  ${name}: { proto: ${proto}, addr: 1, hostname: ${hostname} }\n`);

/** Online sessions (all of them, first page). */
export async function sessions(s: TestServer): Promise<any[]> {
  return (await s.get('/tunnel_sessions')).body.tunnel_sessions;
}

export async function tunnels(s: TestServer): Promise<any[]> {
  return (await s.get('/tunnels')).body.tunnels;
}

/** A credential's token (acl as given). */
export async function credentialToken(s: TestServer, acl: string[] = [], ownerId?: string): Promise<{ id: string; token: string }> {
  const r = await s.post('/credentials', { acl, ...(ownerId ? { owner_id: ownerId } : {}) });
  if (r.status !== 201) throw new Error(r.text);
  return { id: r.body.id, token: r.body.token };
}

/**
 * A hand-driven agent speaking the protocol over a real socket, for what the real agent never
 * does (ignoring commands, malformed hellos). `answer` gets each control request the server
 * sends and returns [status, body] (or a promise of it), or undefined to never answer.
 */
type FakeAnswer = [number, unknown] | undefined;
export async function fakeAgent(url: string, token: string, answer: (path: string, body: any) => FakeAnswer | Promise<FakeAnswer>) {
  const http = await import('node:http');
  const http2 = await import('node:http2');
  const { AGENT_PATH, UPGRADE_TOKEN } = await import('../../agent/protocol.js');
  const req = http.request(`${url}${AGENT_PATH}`, { headers: { Connection: 'Upgrade', Upgrade: UPGRADE_TOKEN, Authorization: `Bearer ${token}`, 'Service-Version': '2' } });
  const socket = await new Promise<import('node:net').Socket>((resolve, reject) => {
    req.on('upgrade', (_res, sock, head) => { if (head.length) sock.unshift(head); resolve(sock); });
    req.on('response', (res) => reject(new Error(`refused: ${res.statusCode}`)));
    req.on('error', reject);
    req.end();
  });
  const seen: { path: string; body: any }[] = [];
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    let text = '';
    stream.setEncoding('utf8');
    stream.on('data', (c) => { text += c; });
    stream.on('end', () => {
      const path = String(headers[':path']);
      const body = text ? JSON.parse(text) : undefined;
      seen.push({ path, body });
      void Promise.resolve(answer(path, body)).then((a) => {
        if (!a || stream.destroyed) return;
        stream.respond({ ':status': a[0], 'content-type': 'application/json' });
        stream.end(a[1] === undefined ? undefined : JSON.stringify(a[1]));
      });
    });
  });
  server.emit('connection', socket);
  return { socket, seen, close: () => socket.destroy() };
}

export const validHello = (tunnelsConfig: unknown[] = [{ name: 'fake', proto: 'http', forwards_to: 'http://localhost:1' }]) => ({
  agent_version: '0.0.1', os: 'linux', metadata: '', update_check: true, tunnels: tunnelsConfig,
});
