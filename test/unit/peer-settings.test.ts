// Issue 33's settings and the channel's credentials: --peer-listen / --peer-url / --peer-timeout
// / --drain-grace parse (and refuse) as documented; every instance on one secret key derives the
// same certificate authority, byte for byte, and its leaves verify under it, while another
// key's do not.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../server/config.js';
import { peerCredentials } from '../../server/gateway/peers/credentials.js';

const boxOf = (secret: string) => ({ derive: (info: string) => Buffer.from(crypto.hkdfSync('sha256', Buffer.from(secret), Buffer.alloc(0), `edgeform ${info}`, 32)) });

describe('peer settings', () => {
  it('reads --peer-listen, --peer-url, --peer-timeout and --drain-grace, with their defaults', () => {
    const none = resolveConfig({}, {});
    expect(none.peerListen).toBeUndefined();
    expect(none.drainGraceMs).toBe(0);
    expect(none.peerTimeoutMs).toBe(5000);
    const c = resolveConfig({}, { EDGEFORM_PEER_LISTEN: '10.0.0.5:7443', EDGEFORM_PEER_URL: 'https://edge-1.internal:7443/' });
    expect(c.peerListen).toEqual({ host: '10.0.0.5', port: 7443 });
    expect(c.peerUrl).toBe('https://edge-1.internal:7443');
    expect(c.drainGraceMs).toBe(10_000);
    expect(resolveConfig({ peerListen: '127.0.0.1:0', drainGrace: '3', peerTimeout: 2 }, {})).toMatchObject({ drainGraceMs: 3000, peerTimeoutMs: 2000 });
  });

  it('refuses a peer URL that is not https://HOST:PORT, and a wildcard listener without one', () => {
    for (const url of ['http://10.0.0.5:7443', 'https://10.0.0.5', 'https://10.0.0.5:7443/path', 'not a url']) {
      expect(() => resolveConfig({}, { EDGEFORM_PEER_URL: url }), url).toThrow(/--peer-url \/ EDGEFORM_PEER_URL must be https:\/\/HOST:PORT/);
    }
    expect(() => resolveConfig({ peerListen: '0.0.0.0:7443' }, {})).toThrow(/wildcard address needs --peer-url/);
    expect(() => resolveConfig({ peerListen: 'nowhere' }, {})).toThrow(/--peer-listen \/ EDGEFORM_PEER_LISTEN takes ADDRESS:PORT/);
    expect(() => resolveConfig({ drainGrace: '-1' }, {})).toThrow(/--drain-grace/);
  });

  it('reads --peer-choice (round-robin by default, or prefer-local) and refuses anything else', () => {
    expect(resolveConfig({}, {}).peerChoice ?? 'round-robin').toBe('round-robin');
    expect(resolveConfig({}, { EDGEFORM_PEER_CHOICE: 'prefer-local' }).peerChoice).toBe('prefer-local');
    expect(resolveConfig({ peerChoice: 'round-robin' }, { EDGEFORM_PEER_CHOICE: 'prefer-local' }).peerChoice).toBe('round-robin');
    expect(() => resolveConfig({}, { EDGEFORM_PEER_CHOICE: 'nearest' })).toThrow(/--peer-choice \/ EDGEFORM_PEER_CHOICE must be round-robin or prefer-local, not "nearest"/);
  });
});

describe('peer credentials', () => {
  it('derive one authority per key, byte for byte; a leaf verifies under its own key\'s authority only', () => {
    const a = peerCredentials(boxOf('key one'), 'a');
    const b = peerCredentials(boxOf('key one'), 'b');
    const other = peerCredentials(boxOf('key two'), 'c');
    expect(b.caPem).toBe(a.caPem);
    expect(other.caPem).not.toBe(a.caPem);
    const ca = new crypto.X509Certificate(a.caPem);
    expect(new crypto.X509Certificate(b.certPem).verify(ca.publicKey)).toBe(true);
    expect(new crypto.X509Certificate(other.certPem).verify(ca.publicKey)).toBe(false);
    expect(b.certPem).not.toBe(a.certPem);
  });
});
