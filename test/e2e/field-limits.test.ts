// Per kind with a create body (every family): on create and on PATCH, a field of the wrong
// type and a description or metadata over SPEC's limit are 400 naming the field, and the
// limit itself is accepted. Limits are bytes (UTF-8) except on event subscriptions, where
// SPEC says characters. The catalog drives the list, so a new kind without a sample fails.
import { freshSshPublicKey } from '../helpers/ssh.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalog, kindOf } from '../../provider/catalog/index.js';
import { issueCertificate } from '../../server/crypto/x509-build.js';
import { expectInvalid } from '../helpers/api.js';
import { caPem, freshHostport } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

let counter = 0;
/** A valid create body per kind (a fresh CIDR each time, so rules never collide). */
const samples: Record<string, () => Promise<Record<string, unknown>>> = {
  APIKey: async () => ({}),
  BotUser: async () => ({ name: 'bot' }),
  Credential: async () => ({}),
  SSHCredential: async () => ({ public_key: freshSshPublicKey() }),
  IPPolicy: async () => ({}),
  IPPolicyRule: async () => ({ ip_policy_id: (await s.post('/ip_policies', {})).body.id, cidr: `10.${Math.floor(++counter / 256) % 256}.${counter % 256}.0/24`, action: 'allow' }),
  EventDestination: async () => ({ target: { log: {} } }),
  EventSubscription: async () => ({ sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [(await s.post('/event_destinations', { target: { log: {} } })).body.id] }),
  CertificateAuthority: async () => ({ ca_pem: caPem() }),
  TLSCertificate: async () => {
    const c = issueCertificate({ subject: { commonName: 'limits.example.com' } });
    return { certificate_pem: c.certificatePem, private_key_pem: c.privateKeyPem };
  },
  SSHCertificateAuthority: async () => ({ private_key_type: 'ed25519' }),
  SSHUserCertificate: async () => {
    // Any ed25519 public key will do as the key to sign: take a second authority's.
    const ca = await s.post('/ssh_certificate_authorities', { private_key_type: 'ed25519' });
    return { ssh_certificate_authority_id: ca.body.id, public_key: ca.body.public_key };
  },
  TunnelGroupBackend: async () => ({ labels: { app: 'web' } }),
  HTTPResponseBackend: async () => ({ body: 'ok', status_code: 200 }),
  WeightedBackend: async () => ({}),
  HTTPSEdge: async () => ({ hostports: [freshHostport()] }),
  TCPEdge: async () => ({ hostports: [freshHostport()] }),
  TLSEdge: async () => ({ hostports: [freshHostport()] }),
  HTTPSEdgeRoute: async () => ({ match_type: 'path_prefix', match: `/r${++counter}` }),
  CloudEndpoint: async () => ({ url: `https://ep${++counter}.limits.example`, traffic_policy: '{"on_http_request":[{"actions":[{"type":"deny"}]}]}' }),
};
const CHARS = new Set(['EventSubscription']);

it('every kind with a create body and a description has a sample', () => {
  const kinds = catalog.filter((k) => k.operations.includes('create') && 'description' in k.fields).map((k) => k.kind);
  expect(kinds.filter((k) => !(k in samples))).toEqual([]);
});

/** The collection path, with a fresh parent edge for kinds nested under one. */
async function collection(path: string): Promise<string> {
  if (!path.includes('{edge_id}')) return path;
  const edge = await s.post('/edges/https', { hostports: [freshHostport()] });
  return path.replace('{edge_id}', edge.body.id);
}

describe.each(Object.keys(samples))('%s', (kindName) => {
  const kind = kindOf(kindName);
  const sample = samples[kindName];
  const create = async (extra: object) => s.post(await collection(kind.path), { ...(await sample()), ...extra });
  const patch = async (extra: object) => {
    const made = await create({});
    expect(made.status, made.text).toBe(201);
    return s.patch(new URL(made.body.uri).pathname, extra);
  };
  const bounded = ['description', 'metadata'].filter((f) => f in kind.fields);

  it('creates from the sample body (the cases below differ from it in one field)', async () => {
    expect((await create({})).status).toBe(201);
  });

  const updatable = Object.keys(kind.fields).filter((f) => !kind.immutable.includes(f));
  it.each(updatable)('%s of the wrong type: 400 on create and PATCH', async (field) => {
    // A number, where every field of these kinds wants a string, boolean, object or list.
    expectInvalid(await create({ [field]: 12345 }), field);
    expectInvalid(await patch({ [field]: 12345 }), field);
  });

  it.each(bounded.flatMap((field) => {
    const max = field === 'description' ? 255 : 4096;
    const chars = CHARS.has(kindName);
    return [
      { field, reason: `${max} ASCII`, value: 'a'.repeat(max), ok: true },
      { field, reason: `${max + 1} ASCII`, value: 'a'.repeat(max + 1), ok: false },
      // Two bytes each: over the limit in bytes, within it in characters.
      { field, reason: `${max / 2 + 1} two-byte characters`, value: 'é'.repeat(Math.ceil(max / 2) + 1), ok: chars },
      { field, reason: `${max} two-byte characters`, value: 'é'.repeat(max), ok: chars },
    ];
  }))('$field of $reason: ok=$ok on create and PATCH', async ({ field, value, ok }) => {
    for (const r of [await create({ [field]: value }), await patch({ [field]: value })]) {
      if (ok) expect(r.body[field], r.text).toBe(value);
      else expectInvalid(r, field);
    }
  });
});
