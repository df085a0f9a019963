// The ACME settings (`--acme-directory`, `--acme-email`, `--acme-ca-file`,
// EDGEFORM_ACME_RETRY_SECONDS), checked at start: without a directory there is no ACME at
// all and the local CA answers every name, as `npm start` has always done (offline).
import fs from 'node:fs';

export interface AcmeSettings {
  /** The directory URL (https; http only on a loopback address). */
  directoryUrl: string;
  /** The account's contact address, if any. */
  email?: string;
  /** A root to trust for the directory besides the system's (a test directory such as Pebble), PEM. */
  caPem?: string;
  /** The first wait after a failed order, in seconds; it doubles per failure up to MAX_RETRY_SECONDS. */
  retrySeconds: number;
}

/** A failed order waits at most this long before the next (unless the directory's Retry-After asks for more). */
export const MAX_RETRY_SECONDS = 3600;

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

export function acmeSettings(directory: string | undefined, email: string | undefined, caFile: string | undefined, retrySeconds: number): AcmeSettings | undefined {
  if (directory === undefined) {
    if (email !== undefined || caFile !== undefined) throw new Error('--acme-email / --acme-ca-file need --acme-directory (EDGEFORM_ACME_DIRECTORY): without a directory the local CA issues every certificate');
    return undefined;
  }
  let url: URL | undefined;
  try {
    url = new URL(directory);
  } catch {
    url = undefined;
  }
  if (!url || !(url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.test(url.hostname)))) {
    throw new Error(`--acme-directory / EDGEFORM_ACME_DIRECTORY must be an https URL (http only on a loopback address), such as https://acme-v02.api.letsencrypt.org/directory, not ${JSON.stringify(directory)}`);
  }
  if (email !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) throw new Error(`--acme-email / EDGEFORM_ACME_EMAIL must be an email address, not ${JSON.stringify(email)}`);
  let caPem: string | undefined;
  if (caFile !== undefined) {
    try {
      caPem = fs.readFileSync(caFile, 'utf8');
    } catch (e) {
      throw new Error(`--acme-ca-file / EDGEFORM_ACME_CA_FILE: cannot read ${caFile}: ${(e as { code?: string }).code ?? (e as Error).message}`);
    }
    if (!caPem.includes('-----BEGIN CERTIFICATE-----')) throw new Error(`--acme-ca-file / EDGEFORM_ACME_CA_FILE: ${caFile} holds no PEM certificate`);
  }
  return { directoryUrl: directory, email, caPem, retrySeconds };
}
