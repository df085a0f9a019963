// One client cancelling requests through a tunnel by the hundred a second (HTTP/2 rapid reset)
// must not deny the other clients of the same agent. The server paces its cancels toward the
// agent (its HTTP/2 server ends a session past about 1,000 resets at once and 33 a second), and
// the backlog of cancels waiting for their turn is counted per client address: the abusive
// client's own new requests are refused (503 ERR_SERVICE_752) once its share waits, while a
// polite client's requests through the same agent all succeed. Real sockets: the in-process
// server's --ingress listener, `edgeform agent`, a local upstream that never answers /hold.
// The polite client comes from another loopback address (127.0.0.2), as another client would.
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let port: number;
let ca: string;
let upstream: http.Server;
let agent: AgentProcess;
/** Called when the upstream has a request for /hold/<id> (the abuser cancels it then). */
const arrived = new Map<string, () => void>();

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    req.resume();
    if (req.url?.startsWith('/hold/')) return void arrived.get(req.url)?.();
    res.end(`upstream ${req.url}`);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  // The pacer's figures made small (800 at once, 25 a second, 1,000 and 100 waiting), so that a
  // test process reaches them in seconds: 40 at once, 5 a second, 100 waiting, 10 per client;
  // and relays per client 30 (128): one client's waiting cancels are at most its 10 and the 30
  // it has in flight, as by default at most 100 and 128, under the connection's 100 (1,000).
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }], ingressRelaysPerClient: 30, agentResetPace: { burst: 40, rate: 5, waiting: 100, waitingPerClient: 10 } });
  port = ingressPort(s, 443);
  ca = localCa(s);
  const cr = await credentialToken(s);
  agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=resets', '--forwards-to', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const group = await s.post('/backends/tunnel_group', { labels: { app: 'resets' } });
  const edge = await s.post('/edges/https', { hostports: ['resets.example.com:443'] });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: group.body.id } });
}, 60_000);

afterAll(async () => {
  agent?.kill();
  await s?.close().catch(() => {});
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

/**
 * Sends /hold requests on one HTTP/2 session, up to 100 in flight and 4 every 10 ms, and
 * cancels each as soon as the upstream has it (so that each cancel needs a reset toward the
 * agent), until `stop()`; counts the cancels and the answers it got before cancelling (503s).
 */
function abuse() {
  const client = http2.connect('https://resets.example.com', { createConnection: () => tls.connect({ host: '127.0.0.1', port, servername: 'resets.example.com', ca, ALPNProtocols: ['h2'] }) });
  client.on('error', () => {});
  let cancels = 0;
  let inFlight = 0;
  let serial = 0;
  const statuses = new Map<number, number>();
  const codes = new Set<string>();
  const pump = setInterval(() => {
    for (let i = 0; i < 4 && inFlight < 100 && !client.destroyed; i++) {
      const path = `/hold/${++serial}`;
      const stream = client.request({ ':path': path });
      inFlight++;
      stream.on('error', () => {});
      stream.on('response', (h) => {
        const status = Number(h[':status']);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        codes.add(String(h['edgeform-error-code']));
      });
      arrived.set(path, () => { cancels++; stream.close(http2.constants.NGHTTP2_CANCEL); });
      stream.once('close', () => { inFlight--; arrived.delete(path); });
      stream.resume();
    }
  }, 10);
  return {
    cancels: () => cancels,
    statuses,
    codes,
    stop: () => { clearInterval(pump); client.destroy(); },
  };
}

describe('a client that cancels requests in a loop', { timeout: 90_000 }, () => {
  it('is refused its own new requests (503 ERR_SERVICE_752) while another client of the same agent is served every time', async () => {
    const alone = await edgeRequest({ port, host: 'resets.example.com', ca, path: '/ok/alone', localAddress: '127.0.0.2' });
    expect([alone.status, alone.text]).toEqual([200, 'upstream /ok/alone']);
    const abuser = abuse();
    const polite: string[] = [];
    const started = Date.now();
    try {
      // 10 s: past the pacer's burst and past the 100 waiting resets that used to refuse everyone.
      while (Date.now() - started < 10_000) {
        const r = await edgeRequest({ port, host: 'resets.example.com', ca, path: `/ok/${polite.length}`, localAddress: '127.0.0.2' });
        polite.push(r.status === 200 ? r.text : `${r.status} ${r.headers['edgeform-error-code']}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      abuser.stop();
    }
    // The abuse happened: cancels past the burst, and the abuser's own requests were refused.
    expect(abuser.cancels()).toBeGreaterThan(50);
    expect(abuser.statuses.get(503) ?? 0).toBeGreaterThan(0);
    expect(abuser.codes).toContain('ERR_SERVICE_752');
    // The polite client: every request answered by the upstream.
    expect(polite.length).toBeGreaterThan(10);
    expect(polite.filter((t) => !t.startsWith('upstream /ok/'))).toEqual([]);
  });
});
