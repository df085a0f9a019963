// SIGTERM under a keep-alive load, as a reconciler makes it: several clients, each on its
// own kept-alive connection, sending back to back. No request may meet a reset: each one
// is answered, with its 2xx or with the JSON 503 and Connection: close, and the in-flight
// ones finish; then the process exits 0.
import { Client } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { killServers, serve } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterEach(killServers);
afterAll(removeTempDirs);

const TOKEN = 'shutdowntest0123456789abcdefghijklmnopqrstuvwxyz';
const CLIENTS = 8;
/** Bounds: requests per client, and time per client after SIGTERM. */
const MAX_REQUESTS = 3000;

interface Outcome { statuses: number[]; errors: string[]; last?: { status: number; connection: string | null; body: any } }

async function keepAliveClient(url: string, started: () => void, stop: { at?: number }): Promise<Outcome> {
  const client = new Client(url, { pipelining: 1, keepAliveTimeout: 60_000 });
  const out: Outcome = { statuses: [], errors: [] };
  try {
    for (let i = 0; i < MAX_REQUESTS; i++) {
      if (stop.at && Date.now() - stop.at > 20_000) break;
      const post = i % 3 === 2;
      try {
        const res = await client.request({
          path: post ? '/ip_policies' : '/ip_policies?limit=5',
          method: post ? 'POST' : 'GET',
          headers: { authorization: `Bearer ${TOKEN}`, 'service-version': '2', ...(post ? { 'content-type': 'application/json' } : {}) },
          body: post ? JSON.stringify({ description: `load ${i}` }) : undefined,
        });
        const text = await res.body.text();
        out.statuses.push(res.statusCode);
        started();
        if (res.statusCode === 503) {
          out.last = { status: res.statusCode, connection: String(res.headers.connection ?? ''), body: JSON.parse(text) };
          break;
        }
      } catch (e) {
        out.errors.push((e as { code?: string }).code ?? (e as Error).message);
        break;
      }
    }
  } finally {
    await client.destroy().catch(() => {});
  }
  return out;
}

describe('SIGTERM with clients on kept-alive connections', () => {
  it('answers every request (2xx, or 503 with Connection: close), resets none, and exits 0', async () => {
    const s = await serve(['--data-dir', tempDir()], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
    let answered = 0;
    const stop: { at?: number } = {};
    let signal!: () => void;
    const enough = new Promise<void>((r) => { signal = r; });
    const clients = Array.from({ length: CLIENTS }, () => keepAliveClient(s.url, () => { if (++answered === 200) signal(); }, stop));
    await enough;
    stop.at = Date.now();
    s.child.kill('SIGTERM');
    const outcomes = await Promise.all(clients);
    expect(await s.exited).toBe(0);

    expect(outcomes.flatMap((o) => o.errors)).toEqual([]);
    for (const o of outcomes) {
      for (const status of o.statuses) expect([200, 201, 503]).toContain(status);
      // Every client was told to go: its last answer is the 503, and it closes the connection.
      expect(o.last?.status).toBe(503);
      expect(o.last?.connection).toBe('close');
      expect(o.last?.body).toMatchObject({ error_code: 'ERR_SERVICE_503', status_code: 503, details: { operation_id: expect.stringMatching(/^op_/) } });
    }
    expect(s.lines().at(-1).msg).toBe('stopped');
  }, 90_000);
});
