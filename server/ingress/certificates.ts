// Which certificate answers a TLS server name: an uploaded certificate whose SANs match it
// (a wildcard covers exactly one leftmost label, as X.509 defines it), an exact name before
// a wildcard, then the one whose validity started last (then the newest upload), among those
// valid now; with none, a leaf from the local CA.
import type { CertificateEntry } from './types.js';

/** 2 for an exact DNS or IP match, 1 for a wildcard match, 0 for none. */
export function matchStrength(cert: CertificateEntry, name: string): number {
  if (cert.dnsNames.includes(name) || cert.ips.includes(name)) return 2;
  const dot = name.indexOf('.');
  if (dot > 0 && cert.dnsNames.includes(`*${name.slice(dot)}`) && name.slice(dot + 1).includes('.')) return 1;
  return 0;
}

export function selectCertificate(certificates: CertificateEntry[], name: string, now: number): CertificateEntry | undefined {
  let best: CertificateEntry | undefined;
  let bestStrength = 0;
  for (const c of certificates) {
    if (c.notBefore.getTime() > now || c.notAfter.getTime() < now) continue;
    const strength = matchStrength(c, name);
    if (!strength) continue;
    const newer = best && (c.notBefore.getTime() - best.notBefore.getTime() || c.createdAt.getTime() - best.createdAt.getTime()) > 0;
    if (strength > bestStrength || (strength === bestStrength && newer)) {
      best = c;
      bestStrength = strength;
    }
  }
  return best;
}
