// The ACME directory down, then back, end to end through `edgeform serve`: while Pebble is
// stopped each order fails, is logged, counted and is the event
// tls_certificate_order_failed.v0, retried with backoff, and the name keeps being served with
// the local CA's certificate; once Pebble is back (new roots: it keeps nothing, and no longer
// knows the account, which is registered again) the certificate is issued. Validation is not
// what this is about, so Pebble runs with PEBBLE_VA_ALWAYS_VALID=1.
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startIngress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startPebble, stopPebbles } from '../helpers/pebble.js';
import { freePort } from '../helpers/ports.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

afterAll(() => {
  killServers();
  stopPebbles();
  removeTempDirs();
});

describe('the ACME directory down, then back', () => {
  it('fails the order (logged, counted, an event), serves the local CA meanwhile, and issues once the directory is back', async () => {
    const [p443, p80] = [await freePort(), await freePort()];
    const pebble = await startPebble({ httpPort: p80, tlsPort: p443, env: { PEBBLE_VA_ALWAYS_VALID: '1' } });
    const ing = await startIngress([443], { EDGEFORM_ACME_RETRY_SECONDS: '1' }, ['--acme-directory', pebble.directory, '--acme-ca-file', pebble.caFile], { 443: p443 });
    const destination = (await ing.api('POST', '/event_destinations', { target: { log: {} } })).body.id;
    expect((await ing.api('POST', '/event_subscriptions', { sources: [{ type: 'tls_certificate_order_failed.v0' }], destination_ids: [destination] })).status).toBe(201);
    pebble.stop();
    await ing.apply([
      { kind: 'HTTPResponseBackend', name: 'down', body: 'still served', status_code: 200 },
      { kind: 'HTTPSEdge', name: 'down', hostports: ['down.acme.test:443'], routes: [{ match_type: 'path_prefix', match: '/', backend: { backend_id: 'HTTPResponseBackend/down' } }] },
    ].map((d) => stringify(d, { lineWidth: 0 })).join('---\n'));
    await until(() => ing.lines().filter((l) => /^acme: the order for down\.acme\.test failed \(attempt \d+\)/.test(String(l.msg))).length >= 2, 60_000, () => ing.serving.stdout());
    const events = (await ing.api('GET', `/event_destinations/${destination}/events`)).body.events;
    expect(events[0]).toMatchObject({ type: 'tls_certificate_order_failed.v0', object: { id: null, hostname: 'down.acme.test', attempts: expect.any(Number) } });
    expect(String(events[0].object.error)).not.toBe('');
    expect(await (await fetch(`${ing.url}/metrics`)).text()).toMatch(/edgeform_acme_orders_total\{result="failed"\} [1-9]/);
    // Meanwhile the local CA's certificate serves the name, as without ACME.
    const meanwhile = await edgeRequest({ port: p443, host: 'down.acme.test', ca: await ing.ca() });
    expect(meanwhile.text).toBe('still served');
    expect(ing.serving.child.exitCode).toBeNull();
    await pebble.restart();
    let cert: any;
    await until(async () => {
      cert = (await ing.api('GET', '/tls_certificates')).body.tls_certificates.find((c: any) => c.issued_at && c.subject_alternative_names.dns_names.includes('down.acme.test'));
      return !!cert;
    }, 90_000, () => `not issued after the directory came back:\n${ing.serving.stdout().split('\n').filter((l) => l.includes('acme')).join('\n')}`);
    const r = await edgeRequest({ port: p443, host: 'down.acme.test', ca: await pebble.root() });
    expect(r.text).toBe('still served');
  }, 300_000);
});
