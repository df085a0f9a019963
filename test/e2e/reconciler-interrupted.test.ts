// Apply is re-runnable: a create whose response is lost (the server did the work) is looked
// up before it is sent again, so the run finishes; an apply cut off part-way (the server
// stopped) exits 1 naming what failed, and the next apply finishes the job with no
// duplicates. Identity lives on the server (stamps, natural keys), so a run recognises
// what was made, even when it never heard back.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { caPem } from '../helpers/edge-fixtures.js';
import { bigManifest, census, COMPLETE as complete, DECLARED, NO_CHANGES, stackRunner } from '../helpers/reconciler.js';


/**
 * A proxy in front of the server. Once `dropAfter` POSTs have been answered, it still
 * forwards each POST (the server creates the resource) but cuts the connection instead of
 * answering, as when the network or the client dies at the worst moment.
 */
async function lossyProxy(upstream: string, dropAfter: number) {
  let posts = 0;
  const state = { dropping: true, dropped: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const drop = state.dropping && req.method === 'POST' && ++posts > dropAfter;
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k))) as Record<string, string>;
      const up = await fetch(`${upstream}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
      const body = Buffer.from(await up.arrayBuffer());
      if (drop) {
        state.dropped++;
        req.socket.destroy();
        return;
      }
      res.writeHead(up.status, Object.fromEntries([...up.headers].filter(([k]) => !['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(k))));
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, state, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('reconciler: an interrupted apply finishes on the next run', () => {
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it('when responses to creates are lost after the server made them: each is looked up before it is sent again, so the run finishes', async () => {
    const s = await startTestServer();
    servers.push(s);
    // The apply's first POST is its first batch (36 creates, answered); the answer to the second (64) is lost.
    const proxy = await lossyProxy(s.url, 1);
    try {
      const dir = manifestDir({ 'big.yaml': bigManifest() });
      const cut = stackRunner(s, { EDGEFORM_API_URL: proxy.url });
      const first = await cut.run(['apply', '-f', dir, '--auto-approve']);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      expect(proxy.state.dropped).toBeGreaterThan(0);
      expect(first.stdout).toContain(`Apply complete! Resources: ${DECLARED} added, 0 changed, 0 destroyed.`);
      // Nothing made twice, although every create after the first batch went unanswered.
      expect(await census(s)).toEqual(complete);
      proxy.state.dropping = false;
      const second = await cut.run(['apply', '-f', dir, '--auto-approve']);
      expect(second.code, second.stdout + second.stderr).toBe(0);
      expect(second.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 0 destroyed.');
      const plan = await cut.planJson(['-f', dir]);
      expect(plan.changes).toBe(false);
      expect(plan.resource_changes).toHaveLength(DECLARED);
    } finally {
      await proxy.close();
    }
  });

  it('when the server stops part-way and starts again after the run gave up (its lock expires by itself)', async () => {
    let responses = 0;
    let stopped: Promise<void> | undefined;
    let s: TestServer;
    // Stop the server after 85 of the apply's ~104 requests, from inside its own request log
    // (late, because each request left then retries for ~8 s before the apply gives up).
    s = await startTestServer({
      // The run cannot release its lock on a stopped server: a short lease lets the next run in soon.
      stackLockLeaseSeconds: 2,
      log: () => {
        if (++responses === 85) stopped = s.server.close();
      },
    });
    servers.push(s);
    const dir = manifestDir({ 'big.yaml': bigManifest() });
    const r = stackRunner(s);
    const first = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(stopped).toBeDefined();
    await stopped;
    expect(first.code).toBe(1);
    expect(first.stdout).toContain('Apply failed: ');
    expect(first.stderr).toMatch(/Warning: could not release the lock on stack "default" \(.*\); it expires by itself at \S+, or run: edgeform force-unlock default [0-9a-f-]{36}/);
    await s.restart();
    const partial = await census(s);
    expect(partial).not.toEqual(complete);
    const second = await r.run(['apply', '-f', dir, '--auto-approve', '--lock-timeout', '30s']);
    expect(second.code, second.stdout + second.stderr).toBe(0);
    expect(await census(s)).toEqual(complete);
    const plan = await r.run(['plan', '-f', dir, '--detailed-exitcode']);
    expect(plan.stdout).toContain(NO_CHANGES);
    expect(plan.code).toBe(0);
  });

  it('when a replacement made the new resource but could not delete the old one', async () => {
    const s = await startTestServer();
    servers.push(s);
    const r = stackRunner(s);
    const doc = (pem: string) => stringify({ kind: 'CertificateAuthority', name: 'clients', ca_pem: pem });
    const dir = manifestDir({ 'ca.yaml': doc(caPem('replaced CA 1')) });
    await r.apply(['-f', dir]);
    const [old] = (await s.get('/certificate_authorities')).body.certificate_authorities;
    // An unmanaged edge uses the old CA, so the API refuses its delete: the replacement stops half-way.
    const edge = (await s.post('/edges/https', { mutual_tls: { certificate_authority_ids: [old.id] } })).body;
    fs.writeFileSync(path.join(dir, 'ca.yaml'), doc(caPem('replaced CA 2')));
    const first = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(first.code).toBe(1);
    expect(first.stdout).toContain('Error: CertificateAuthority/clients: delete failed (HTTP 409');
    expect((await s.get('/certificate_authorities')).body.certificate_authorities).toHaveLength(2);
    expect((await s.del(`/edges/https/${edge.id}`)).status).toBe(204);
    // The old one is stamped as the same document: apply deletes it, without --prune, as the
    // rest of the replacement, and does not call it undeclared.
    const plan = await r.run(['plan', '-f', dir]);
    expect(plan.stdout).toContain(`# CertificateAuthority/clients (deposed ${old.id}) will be destroyed`);
    expect(plan.stdout).not.toContain('no longer declared');
    const second = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(second.code, second.stdout).toBe(0);
    expect(second.stdout).toContain('Apply complete! Resources: 0 added, 0 changed, 1 destroyed.');
    const left = (await s.get('/certificate_authorities')).body.certificate_authorities;
    expect(left).toHaveLength(1);
    expect(left[0].id).not.toBe(old.id);
    expect((await r.run(['plan', '-f', dir, '--detailed-exitcode'])).code).toBe(0);
  });
});
