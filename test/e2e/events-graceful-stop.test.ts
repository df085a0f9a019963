// A graceful stop (SIGTERM) of `edgeform serve` lets an event send in flight finish and
// records it: the destination, which answered, does not get the same event again after the
// restart (duplicates are for an instance that dies, docs/events.md).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { api, killServers, serve } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'gracefulstop0123456789abcdefghijklmnopqrstuvwxyz';

afterEach(() => killServers());
afterAll(() => removeTempDirs());

describe('events across a graceful stop', () => {
  it('SIGTERM during a send: the send finishes, and the event is not sent again after the restart', async () => {
    const ids: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let aborted = false;
    const rx = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', async () => {
        const event = JSON.parse(body);
        ids.push(event.id);
        // The first event is answered only after the server was told to stop.
        if (ids.length === 1) {
          res.on('close', () => { if (!res.writableFinished) aborted = true; });
          await released;
        }
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`;
    try {
      const dir = tempDir('edgeform-graceful-');
      const first = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN, EDGEFORM_EVENT_DELIVERY_TIMEOUT_MS: '60000' });
      const dest = await (await api(`${first.url}/event_destinations`, TOKEN, 'POST', { target: { http: { url } } })).json();
      expect((await api(`${first.url}/event_subscriptions`, TOKEN, 'POST', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [dest.id] })).status).toBe(201);
      expect((await api(`${first.url}/ip_policies`, TOKEN, 'POST', { description: 'one' })).status).toBe(201);
      await until(() => ids.length === 1, 15_000, () => 'the first event was never sent');
      first.child.kill('SIGTERM');
      await first.waitFor(/received SIGTERM/);
      // Held well past the rest of the shutdown: a server that aborts its sends on stop has done so by then.
      await until(() => aborted, 5000).catch(() => {});
      release();
      expect(await first.exited).toBe(0);
      expect(aborted).toBe(false);
      const second = await serve(['--data-dir', dir], { EDGEFORM_BOOTSTRAP_TOKEN: TOKEN });
      // Events of a destination go in order: once the next one arrives, the first would have come again before it.
      expect((await api(`${second.url}/ip_policies`, TOKEN, 'POST', { description: 'two' })).status).toBe(201);
      await until(() => ids.length >= 2, 15_000, () => 'the second event was never sent');
      expect(ids).toHaveLength(2);
      expect(new Set(ids).size).toBe(2);
    } finally {
      release();
      rx.closeAllConnections();
      await new Promise<void>((r) => rx.close(() => r()));
    }
  }, 120_000);
});
