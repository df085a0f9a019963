// Starts the real server in-process on a free loopback port with a fresh SQLite file,
// and speaks HTTP to it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch, type Headers } from 'undici';
import { resolveConfig, type ServerConfig } from '../../server/config.js';
import { startServer, type RunningServer } from '../../server/main.js';

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string | null;
  version?: string | null;
  headers?: Record<string, string>;
  /** Send this raw string as the body instead of JSON. */
  raw?: string;
  contentType?: string | null;
}

export interface TestServer {
  url: string;
  token: string;
  dir: string;
  server: RunningServer;
  logs: string[];
  request<T = any>(method: string, path: string, body?: unknown, opts?: RequestOptions): Promise<Reply<T>>;
  get<T = any>(path: string, opts?: RequestOptions): Promise<Reply<T>>;
  post<T = any>(path: string, body?: unknown, opts?: RequestOptions): Promise<Reply<T>>;
  patch<T = any>(path: string, body?: unknown, opts?: RequestOptions): Promise<Reply<T>>;
  put<T = any>(path: string, body?: unknown, opts?: RequestOptions): Promise<Reply<T>>;
  del<T = any>(path: string, opts?: RequestOptions): Promise<Reply<T>>;
  /** Stops the server (keeping its files) and starts it again on the same database. */
  restart(): Promise<void>;
  /** restart's two halves, for a test that acts while the server is down: stop, then start on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export const TEST_TOKEN = 'testtoken0123456789abcdefghijklmnopqrstuvwxyzAB';
/** A key for the instances of one PostgreSQL database to share (each would otherwise generate its own in its data folder, and be refused). */
export const TEST_SECRET_KEY = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff';

export async function startTestServer(overrides: Partial<ServerConfig> & { dir?: string } = {}): Promise<TestServer> {
  const dir = overrides.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-test-'));
  const logs: string[] = [];
  const config: ServerConfig = {
    // No limits: suites send thousands of requests, and wrong tokens on purpose, from one address.
    ...resolveConfig({ port: 0, dataDir: dir, apiRateLimit: 0, authFailureLimit: 0 }, {}),
    fingerprintRateLimit: 0,
    bootstrapToken: TEST_TOKEN,
    log: (line) => logs.push(line),
    ...overrides,
  };
  let server = await startServer(config);
  let port = 0;
  // A pool of our own, replaced on restart: a kept-alive connection to the stopped server
  // would otherwise be picked for the next request before its close was noticed.
  let agent = new Agent();
  const request = async (method: string, p: string, body?: unknown, opts: RequestOptions = {}): Promise<Reply> => {
    const headers: Record<string, string> = { ...opts.headers };
    const token = opts.token === undefined ? TEST_TOKEN : opts.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    const version = opts.version === undefined ? '2' : opts.version;
    if (version !== null) headers['service-version'] = version;
    let payload: string | undefined;
    if (opts.raw !== undefined) payload = opts.raw;
    else if (body !== undefined) payload = JSON.stringify(body);
    if (payload !== undefined && opts.contentType !== null) headers['content-type'] = opts.contentType ?? 'application/json';
    const res = await fetch(p.startsWith('http') ? p : `${server.url}${p}`, { method, headers, body: payload, dispatcher: agent });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };
  const ts: TestServer = {
    get url() { return server.url; },
    token: TEST_TOKEN,
    dir,
    get server() { return server; },
    logs,
    request,
    get: (p, o) => request('GET', p, undefined, o),
    post: (p, b, o) => request('POST', p, b ?? {}, o),
    patch: (p, b, o) => request('PATCH', p, b ?? {}, o),
    put: (p, b, o) => request('PUT', p, b ?? {}, o),
    del: (p, o) => request('DELETE', p, undefined, o),
    async restart() {
      await ts.stop();
      await ts.start();
    },
    async stop() {
      port = Number(new URL(server.listening).port);
      // The client's connections first: the server waits for kept-alive connections to go idle.
      await agent.close();
      await server.close();
      agent = new Agent();
    },
    async start() {
      server = await startServer({ ...config, port });
    },
    async close() {
      await agent.close();
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  return ts;
}
