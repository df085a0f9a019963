// Keyed fingerprints of the manifests' write-only values, made by the server
// (POST /_edgeform/fingerprints, docs/api.md "Secret fingerprints") under a key only it
// holds: the stamp's `s` then tells the plan that a declared secret changed, while a reader
// of `metadata` cannot test guesses against it offline.
import { createHash } from 'node:crypto';
import { ApiClientError, type ApiClient } from '../../provider/client/index.js';
import { canonical } from '../../provider/catalog/canonical-json.js';
import type { Manifest } from '../manifest/validate.js';
import { childAddress } from '../plan/plan.js';

export const FINGERPRINTS_PATH = '/_edgeform/fingerprints';
const BATCH = 100;

export interface SecretFingerprints {
  /** Address -> keyed fingerprint; undefined when the server has no such extension. */
  byAddress?: Map<string, string>;
  warnings: string[];
}

/** Each declared document and child with write-only values: its address and the values. */
export function secretItems(manifest: Manifest): Array<{ address: string; values: Record<string, unknown> }> {
  const out: Array<{ address: string; values: Record<string, unknown> }> = [];
  for (const d of manifest.documents) {
    if (Object.keys(d.secrets).length) out.push({ address: d.address, values: d.secrets });
    for (const list of Object.values(d.children)) {
      for (const c of list) if (Object.keys(c.secrets).length) out.push({ address: childAddress(d.address, c.spec, c.key), values: c.secrets });
    }
  }
  return out;
}

/**
 * Fingerprints already made, kept by a long-lived process (continuous reconcile) so that a
 * run whose secrets did not change asks for none: the server's budget (1,000 per API key
 * per hour by default) would otherwise be spent by a loop re-asking every interval. Keyed by
 * API URL, stack, address and a hash of the values; held in memory only.
 */
export type FingerprintCache = Map<string, string>;

const cacheKey = (client: ApiClient, stack: string, item: { address: string; values: Record<string, unknown> }) =>
  createHash('sha256').update(`${client.baseUrl}\0${stack}\0${item.address}\0${canonical(item.values)}`).digest('base64url');

/** Asks the server for the fingerprints; against a server without the extension, none (and a warning). */
export async function fetchSecretFingerprints(client: ApiClient, stack: string, all: Array<{ address: string; values: Record<string, unknown> }>, cache?: FingerprintCache): Promise<SecretFingerprints> {
  const byAddress = new Map<string, string>();
  const items = cache ? all.filter((item) => {
    const known = cache.get(cacheKey(client, stack, item));
    if (known) byAddress.set(item.address, known);
    return !known;
  }) : all;
  for (let i = 0; i < items.length; i += BATCH) {
    const batch = items.slice(i, i + BATCH);
    let answer: { fingerprints?: unknown };
    try {
      answer = await client.call('POST', FINGERPRINTS_PATH, { stack, items: batch }, { retryTooMany: false });
    } catch (e) {
      if (e instanceof ApiClientError && (e.status === 404 || e.status === 405 || e.status === 501)) {
        return {
          warnings: [
            `the server has no secret fingerprints (POST ${FINGERPRINTS_PATH}: ${e.status}), so changes to write-only values in the manifests cannot be seen: they are taken as unchanged, and sent again with the next update of their resource. Upgrade the server to compare them.`,
          ],
        };
      }
      throw e;
    }
    const got = answer?.fingerprints;
    if (!Array.isArray(got) || got.length !== batch.length || !got.every((f) => typeof f === 'string')) {
      throw new Error(`POST ${FINGERPRINTS_PATH} answered ${JSON.stringify(answer).slice(0, 200)}, not one fingerprint per item; is the API URL an edgeform server?`);
    }
    batch.forEach((item, j) => {
      byAddress.set(item.address, got[j] as string);
      cache?.set(cacheKey(client, stack, item), got[j] as string);
    });
  }
  return { byAddress, warnings: [] };
}
