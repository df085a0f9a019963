// The life of an ACME certificate, end to end against Pebble issuing 30-second certificates:
// renewed in place (same id, new serial) at two thirds of its lifetime, with the created and
// updated events of any certificate write; deleted, a new one is ordered; a name no edge
// serves any more is not renewed. Validation is not what these tests are about, so Pebble
// runs with PEBBLE_VA_ALWAYS_VALID=1 (acme-issuance.test.ts validates for real).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startPebble, stopPebbles, type Pebble } from '../helpers/pebble.js';
import { freePort } from '../helpers/ports.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const VALIDITY = 30;
let pebble: Pebble;
let ing: Ingress;
let destination: string;

beforeAll(async () => {
  const [p443, p80] = [await freePort(), await freePort()];
  pebble = await startPebble({ httpPort: p80, tlsPort: p443, validitySeconds: VALIDITY, env: { PEBBLE_VA_ALWAYS_VALID: '1' } });
  ing = await startIngress([443], { EDGEFORM_ACME_RETRY_SECONDS: '1' }, ['--acme-directory', pebble.directory, '--acme-ca-file', pebble.caFile], { 443: p443 });
  destination = (await ing.api('POST', '/event_destinations', { target: { log: {} } })).body.id;
  const sub = await ing.api('POST', '/event_subscriptions', { sources: [{ type: 'tls_certificate_created.v0' }, { type: 'tls_certificate_updated.v0' }], destination_ids: [destination] });
  expect(sub.status).toBe(201);
}, 180_000);

afterAll(() => {
  killServers();
  stopPebbles();
  removeTempDirs();
});

const edge = (name: string) =>
  [
    { kind: 'HTTPResponseBackend', name: name.split('.')[0], body: `hello ${name}`, status_code: 200 },
    { kind: 'HTTPSEdge', name: name.split('.')[0], hostports: [`${name}:443`], routes: [{ match_type: 'path_prefix', match: '/', backend: { backend_id: `HTTPResponseBackend/${name.split('.')[0]}` } }] },
  ].map((d) => stringify(d, { lineWidth: 0 })).join('---\n');

async function certificatesFor(name: string): Promise<any[]> {
  const r = await ing.api('GET', '/tls_certificates');
  return r.body.tls_certificates.filter((c: any) => c.issued_at && c.subject_alternative_names.dns_names.includes(name));
}

async function waitFor(name: string, test: (c: any) => boolean, timeoutMs = 120_000): Promise<any> {
  let found: any;
  await until(async () => !!(found = (await certificatesFor(name)).find(test)), timeoutMs, () => `no matching certificate for ${name}:\n${ing.serving.stdout().split('\n').filter((l) => l.includes('acme')).join('\n')}`);
  return found;
}

describe('ACME renewal against Pebble (30-second certificates)', () => {
  it('renews in place at two thirds of the lifetime: same id, new serial, the updated event; the new one serves', async () => {
    await ing.apply(edge('renew.acme.test'));
    const first = await waitFor('renew.acme.test', () => true);
    const root = await pebble.root();
    const served = async () => (await edgeRequest({ port: ing.port(443), host: 'renew.acme.test', ca: root })).peer!.serialNumber.toLowerCase().replace(/^0+/, '');
    // Served before the renewal too, so a context kept from then must give way to the renewed one.
    await until(async () => (await served()) === first.serial_number, 10_000, () => 'the first certificate was not served');
    const lifetime = Date.parse(first.not_after) - Date.parse(first.not_before);
    expect(lifetime).toBeLessThanOrEqual((VALIDITY + 1) * 1000);
    const renewed = await waitFor('renew.acme.test', (c) => c.serial_number !== first.serial_number, 60_000);
    expect(renewed.id).toBe(first.id);
    // Not before two thirds of the first one's lifetime.
    expect(Date.parse(renewed.issued_at)).toBeGreaterThanOrEqual(Math.floor((Date.parse(first.not_before) + (lifetime * 2) / 3) / 1000) * 1000);
    expect(await certificatesFor('renew.acme.test')).toHaveLength(1);
    await until(async () => (await served()) !== first.serial_number, 10_000, () => 'the renewed certificate was not served');
    const events = (await ing.api('GET', `/event_destinations/${destination}/events`)).body.events.filter((e: any) => e.object.id === first.id);
    expect(events.map((e: any) => e.type)).toEqual(expect.arrayContaining(['tls_certificate_created.v0', 'tls_certificate_updated.v0']));
    const metrics = await (await fetch(`${ing.url}/metrics`)).text();
    expect(metrics).toMatch(/edgeform_acme_orders_total\{result="renewed"\} [1-9]/);
  }, 240_000);

  it('a deleted certificate is ordered again (a new id)', async () => {
    await ing.apply(edge('again.acme.test'));
    const first = await waitFor('again.acme.test', () => true);
    expect((await ing.api('DELETE', `/tls_certificates/${first.id}`)).status).toBe(204);
    const next = await waitFor('again.acme.test', (c) => c.id !== first.id);
    expect(next.serial_number).not.toBe(first.serial_number);
  }, 240_000);

  it('a name no edge serves any more is not renewed', async () => {
    await ing.apply(edge('gone.acme.test'));
    const cert = await waitFor('gone.acme.test', () => true);
    const edges = (await ing.api('GET', '/edges/https')).body.https_edges.filter((e: any) => e.hostports.includes('gone.acme.test:443'));
    expect(edges).toHaveLength(1);
    expect((await ing.api('DELETE', `/edges/https/${edges[0].id}`)).status).toBe(204);
    const renewAt = Date.parse(cert.not_before) + ((Date.parse(cert.not_after) - Date.parse(cert.not_before)) * 2) / 3;
    // Past the moment it would have been renewed, and a few ticks more.
    await new Promise((r) => setTimeout(r, Math.max(0, renewAt - Date.now()) + 4000));
    const now = await certificatesFor('gone.acme.test');
    expect(now.map((c) => c.serial_number)).toEqual([cert.serial_number]);
    const orders = ing.lines().filter((l) => l.msg === 'acme: ordering a certificate for gone.acme.test (tls-alpn-01)');
    expect(orders).toHaveLength(1);
  }, 240_000);
});
