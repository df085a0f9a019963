// TLS termination at the edge. A connection's server name (read from its ClientHello before
// the handshake, client-hello.ts) chooses the edge, and the edge's settings choose the TLS
// server that terminates it: one per (minimum version, client-certificate authorities), since
// OpenSSL fixes the accepted versions before the certificate is chosen. That server's
// SNICallback then picks the certificate (certificates.ts) or a local-CA leaf (ca.ts).
import { constants } from 'node:crypto';
import tls from 'node:tls';
import type { LocalCa } from './ca.js';
import { selectCertificate } from './certificates.js';
import type { FullDoc, IngressTable } from './types.js';

export type TlsVersion = '1.0' | '1.1' | '1.2' | '1.3';
const NODE_VERSIONS: Record<TlsVersion, tls.SecureVersion> = { '1.0': 'TLSv1', '1.1': 'TLSv1.1', '1.2': 'TLSv1.2', '1.3': 'TLSv1.3' };

/** What an edge asks of the handshake. */
export interface Termination {
  minVersion: TlsVersion;
  /** Certificate authorities a client certificate must chain to; empty: none asked for. */
  caIds: string[];
}

export function terminationOf(edge: FullDoc): Termination {
  const tt = edge.tls_termination;
  const mtls = edge.mutual_tls;
  return {
    minVersion: (tt && tt.enabled !== false && tt.min_version) || '1.2',
    caIds: mtls && mtls.enabled !== false ? [...(mtls.certificate_authority_ids ?? [])].sort() : [],
  };
}

export const terminationKey = (t: Termination) => `${t.minVersion}|${t.caIds.join(',')}`;

/** Secure contexts made so far are kept up to this many (a table change or a renewed leaf makes new ones). */
const MAX_CONTEXTS = 2000;

/** Certificates and secure contexts by server name, shared by every listener. */
export class TlsContexts {
  private cache = new Map<string, tls.SecureContext>();
  constructor(private ca: LocalCa, private table: () => IngressTable) {}

  /** The certificate and key a server name (or IP address) is answered with: an uploaded one that covers it, else a local-CA leaf. */
  pairFor(servername: string): { id: string; cert: string; key: string } {
    const uploaded = selectCertificate(this.table().certificates, servername, Date.now());
    if (uploaded) {
      // With its validity: a certificate renewed in place (ACME) keeps its id.
      return { id: `cert:${uploaded.id}:${uploaded.notBefore.getTime()}`, cert: uploaded.certificatePem, key: uploaded.privateKeyPem };
    }
    const leaf = this.ca.leafFor(servername);
    return { id: `local:${servername}:${leaf.notAfter}`, cert: leaf.certificatePem, key: leaf.privateKeyPem };
  }

  /** The context for a server name under a termination's client-certificate authorities. */
  contextFor(servername: string, caIds: string[]): tls.SecureContext {
    const table = this.table();
    const pair = this.pairFor(servername);
    const cas = caIds.map((id) => table.certificateAuthorities.get(id)).filter((p): p is string => !!p);
    const key = `${pair.id}|${caIds.join(',')}|${cas.length}`;
    let ctx = this.cache.get(key);
    if (!ctx) {
      ctx = tls.createSecureContext({ cert: pair.cert, key: pair.key, ...(caIds.length ? { ca: cas } : {}) });
      this.cache.set(key, ctx);
      if (this.cache.size > MAX_CONTEXTS) this.cache.delete(this.cache.keys().next().value!);
    }
    return ctx;
  }

  /** Options of the TLS server for one termination (tls.createServer or http2.createSecureServer). */
  serverOptions(t: Termination, handshakeTimeoutMs: number): tls.TlsOptions {
    const ask = t.caIds.length > 0;
    return {
      minVersion: NODE_VERSIONS[t.minVersion],
      // TLS 1.0 and 1.1 need OpenSSL's security level 0 to be offered at all.
      ...(t.minVersion === '1.0' || t.minVersion === '1.1' ? { ciphers: 'DEFAULT:@SECLEVEL=0' } : {}),
      // No renegotiation (TLS 1.2): a second handshake could name another server than the one
      // whose settings were applied (listen.ts checks the name once, after the first).
      secureOptions: constants.SSL_OP_NO_RENEGOTIATION,
      requestCert: ask,
      rejectUnauthorized: ask,
      handshakeTimeout: handshakeTimeoutMs,
      SNICallback: (servername, cb) => {
        try {
          cb(null, this.contextFor(servername.toLowerCase(), t.caIds));
        } catch (e) {
          cb(e as Error, undefined);
        }
      },
    };
  }
}
