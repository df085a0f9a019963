// Failed authentications are limited per client address: after the limit, a wrong token is
// 429 in the error shape with Retry-After, while a valid token from the same address is
// served as before and another address keeps its own allowance. Also: the SQLite files
// are created owner-only, like the key files.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ERRORS } from '../../server/http/errors.js';
import { rawHttp } from '../helpers/raw-http.js';
import { api, killServers, serve } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';

afterEach(killServers);
afterAll(removeTempDirs);

const TOKEN = 'authfailures0123456789abcdefghijklmnopqrstuvwxyz';
const WRONG = 'wrongtoken0123456789abcdefghijklmnopqrstuvwxyzAB';

async function reply(r: Response) {
  return { status: r.status, headers: r.headers, body: (await r.json()) as { error_code: string; status_code: number; msg: string; details: Record<string, unknown> } };
}

describe('failed authentications per client address', () => {
  it('the limit gives 429 with Retry-After; a valid key and another address are unaffected', async () => {
    const s = await serve(['--data-dir', tempDir(), '--host', '::'], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN, EDGEFORM_AUTH_FAILURE_LIMIT: '3' });
    const { port } = new URL(s.url);
    const v4 = `http://127.0.0.1:${port}`;
    const v6 = `http://[::1]:${port}`;
    for (let i = 0; i < 3; i++) {
      const r = await reply(await api(`${v4}/ip_policies`, WRONG));
      expect(r.status).toBe(401);
      expect(r.body.error_code).toBe('ERR_SERVICE_202');
    }
    const limited = await reply(await api(`${v4}/ip_policies`, WRONG));
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error_code: 'ERR_SERVICE_227', status_code: 429, details: { operation_id: expect.stringMatching(/^op_/) } });
    expect(ERRORS.ERR_SERVICE_227.status).toBe(429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.body.details.retry_after).toBe(retryAfter);
    expect(limited.headers.get('service-operation-id')).toBe(limited.body.details.operation_id);
    // Still limited on the next try, with the same or a shorter wait.
    expect((await api(`${v4}/ip_policies`, WRONG)).status).toBe(429);
    // The valid key from the same address is served: a guesser cannot lock its neighbours out.
    expect((await api(`${v4}/ip_policies`, TOKEN)).status).toBe(200);
    // Another address has its own allowance.
    expect((await api(`${v6}/ip_policies`, WRONG)).status).toBe(401);
    expect((await api(`${v6}/ip_policies`, TOKEN)).status).toBe(200);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });

  it('the agent endpoint counts failed credentials against the same per-address allowance as the API', async () => {
    const s = await serve(['--data-dir', tempDir()], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN, EDGEFORM_AUTH_FAILURE_LIMIT: '3' });
    const agentUpgrade = () => rawHttp(s.url, `GET /_edgeform/agent HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: edgeform-agent/2\r\nService-Version: 2\r\nAuthorization: Bearer ${WRONG}\r\n\r\n`);
    for (let i = 0; i < 2; i++) {
      const r = await agentUpgrade();
      expect(r.status, r.head).toBe(401);
      expect(r.body).toMatchObject({ error_code: 'ERR_SERVICE_202' });
    }
    // The third failure is the API's: one allowance for both doors.
    expect((await api(`${s.url}/ip_policies`, WRONG)).status).toBe(401);
    const limited = await agentUpgrade();
    expect(limited.status, limited.head).toBe(429);
    expect(limited.body).toMatchObject({ error_code: 'ERR_SERVICE_227', status_code: 429 });
    expect(Number(/retry-after: (\d+)/i.exec(limited.head)?.[1])).toBeGreaterThan(0);
    expect((await api(`${s.url}/ip_policies`, WRONG)).status).toBe(429);
    // A valid key from the same address is still served.
    expect((await api(`${s.url}/ip_policies`, TOKEN)).status).toBe(200);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });

  it('the SQLite database and its -wal and -shm files are created 0600', async () => {
    const dir = tempDir();
    const s = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
    expect((await api(`${s.url}/ip_policies`, TOKEN, 'POST', {})).status).toBe(201);
    const files = fs.readdirSync(dir).filter((f) => /^edgeform\.db(-wal|-shm)?$/.test(f)).sort();
    expect(files).toEqual(['edgeform.db', 'edgeform.db-shm', 'edgeform.db-wal']);
    for (const f of files) expect(fs.statSync(path.join(dir, f)).mode & 0o777, f).toBe(0o600);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });
});
