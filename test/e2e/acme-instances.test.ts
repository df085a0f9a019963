// Two `edgeform serve` instances on one PostgreSQL database: b orders from Pebble, which
// validates through instance a's 443 listener only, so a answers b's challenges (they are in
// the database), and both serve the stored certificate as soon as it is stored. The lease
// (one order per name at a time across instances) is raced directly below.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startPebble, stopPebbles, type Pebble } from '../helpers/pebble.js';
import { freePort } from '../helpers/ports.js';
import { killServers } from '../helpers/serve.js';
import { TEST_SECRET_KEY } from '../helpers/server.js';
import type { ServerContext } from '../../server/resources/context.js';
import { takeLease } from '../../server/ingress/acme/settings-rows.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the ACME-on-PostgreSQL suite: initdb is not on the PATH ***\n');

describe.skipIf(!available)('ACME with two instances on one PostgreSQL database', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let pebble: Pebble;
  let a: Ingress;
  let b: Ingress;

  beforeAll(async () => {
    pg = await startPostgres();
    const db = await pg.createDatabase('acme');
    const [p443, p80] = [await freePort(), await freePort()];
    pebble = await startPebble({ httpPort: p80, tlsPort: p443 });
    // a's directory is a closed port: its orders all fail, so every certificate is b's order,
    // validated through a (the only instance Pebble reaches), which answers from the database.
    const closed = await freePort();
    a = await startIngress([443], { EDGEFORM_SECRET_KEY: TEST_SECRET_KEY, EDGEFORM_ACME_RETRY_SECONDS: '1' }, ['--database', db, '--acme-directory', `http://127.0.0.1:${closed}/dir`], { 443: p443 });
    b = await startIngress([443], { EDGEFORM_SECRET_KEY: TEST_SECRET_KEY }, ['--database', db, '--acme-directory', pebble.directory, '--acme-ca-file', pebble.caFile]);
  }, 180_000);

  afterAll(() => {
    killServers();
    stopPebbles();
    pg?.stop();
    removeTempDirs();
  });

  it('places one order per name, answers the challenge on whichever instance Pebble reaches, and both serve the certificate', async () => {
    const names = ['one.acme.test', 'two.acme.test', 'three.acme.test'];
    // Written through b: b hears of it first, so b places at least some of the orders; Pebble only reaches a.
    await b.apply(names.flatMap((n) => {
      const k = n.split('.')[0];
      return [
        { kind: 'HTTPResponseBackend', name: k, body: `hello ${n}`, status_code: 200 },
        { kind: 'HTTPSEdge', name: k, hostports: [`${n}:443`], routes: [{ match_type: 'path_prefix', match: '/', backend: { backend_id: `HTTPResponseBackend/${k}` } }] },
      ];
    }).map((d) => stringify(d, { lineWidth: 0 })).join('---\n'));
    let certs: any[] = [];
    await until(async () => {
      certs = (await a.api('GET', '/tls_certificates')).body.tls_certificates.filter((c: any) => c.issued_at);
      return certs.length >= names.length;
    }, 90_000, () => `issued: ${certs.length}\n${[a, b].map((i) => i.serving.stdout().split('\n').filter((l) => l.includes('acme')).join('\n')).join('\n---\n')}`);
    // One certificate per name, each from one order of b's.
    expect(certs.map((c) => c.subject_alternative_names.dns_names[0]).sort()).toEqual([...names].sort());
    const ordersOf = (i: Ingress) => i.lines().filter((l) => /^acme: ordering a certificate for /.test(String(l.msg))).map((l) => l.hostname as string);
    expect(ordersOf(b).sort()).toEqual([...names].sort());
    // a never issued (its directory is closed), so none of the certificates is a's.
    expect(a.lines().some((l) => /^acme: issued the certificate/.test(String(l.msg)))).toBe(false);
    const root = await pebble.root();
    for (const n of names) {
      for (const i of [a, b]) {
        await until(async () => (await edgeRequest({ port: i.port(443), host: n, ca: root }).catch(() => undefined))?.text === `hello ${n}`, 10_000, () => `${n} not served with the issued certificate`);
      }
    }
  }, 300_000);
});

describe.skipIf(!available)('the ACME order lease on PostgreSQL', () => {
  it('of many instances taking one name\'s lease at once, one gets it; an expired lease can be taken over', async () => {
    const pg2 = await startPostgres();
    const { openDatabase } = await import('../../server/store/db.js');
    const db = await openDatabase(await pg2.createDatabase('lease'));
    try {
      const ctx = { db } as unknown as ServerContext;
      const now = Date.now();
      const wins = await Promise.all(Array.from({ length: 8 }, (_, i) => takeLease(ctx, 'acme_lease:race.acme.test', `instance${i}`, now + 60_000, now)));
      expect(wins.filter(Boolean)).toHaveLength(1);
      // Past its time, another instance takes it (once, however many try).
      const later = now + 120_000;
      const takeovers = await Promise.all(Array.from({ length: 8 }, (_, i) => takeLease(ctx, 'acme_lease:race.acme.test', `late${i}`, later + 60_000, later)));
      expect(takeovers.filter(Boolean)).toHaveLength(1);
    } finally {
      await db.close();
      pg2.stop();
    }
  }, 120_000);
});
