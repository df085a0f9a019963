// The catalog: every resource kind, in dependency order (referenced kinds first).
import { apiKey, botUser, credential, sshCredential, user } from './accounts.js';
import { httpResponseBackend, tunnelGroupBackend, weightedBackend } from './backends.js';
import { certificateAuthority, sshCertificateAuthority, sshUserCertificate, tlsCertificate } from './certificates.js';
import type { KindEntry } from './define.js';
import { httpsEdge, httpsEdgeRoute, tcpEdge, tlsEdge } from './edges.js';
import { eventDestination, eventSubscription, eventTypes } from './events.js';
import { ipPolicy, ipPolicyRule } from './ip-policies.js';
import { cloudEndpoint } from './endpoints.js';
import { tunnel, tunnelSession } from './tunnels.js';

export const catalog: readonly KindEntry[] = [
  user,
  botUser,
  apiKey,
  credential,
  sshCredential,
  ipPolicy,
  ipPolicyRule,
  certificateAuthority,
  tlsCertificate,
  sshCertificateAuthority,
  sshUserCertificate,
  tunnelGroupBackend,
  httpResponseBackend,
  weightedBackend,
  httpsEdge,
  httpsEdgeRoute,
  tcpEdge,
  tlsEdge,
  eventDestination,
  eventSubscription,
  tunnelSession,
  tunnel,
  cloudEndpoint,
];

const byKind = new Map(catalog.map((k) => [k.kind, k]));
const byPrefix = new Map(catalog.map((k) => [k.prefix, k]));

export function kindOf(kind: string): KindEntry {
  const entry = byKind.get(kind);
  if (!entry) throw new Error(`unknown kind ${kind}`);
  return entry;
}

export const findKind = (kind: string) => byKind.get(kind);

/** The kind an id belongs to, by its prefix. */
export function kindOfId(id: string): KindEntry | undefined {
  const at = id.indexOf('_');
  return at > 0 ? byPrefix.get(id.slice(0, at)) : undefined;
}

export const EVENT_ACTIONS = ['created', 'updated', 'deleted'] as const;
eventTypes.push(...catalog.filter((k) => k.spec.events).flatMap((k) => EVENT_ACTIONS.map((a) => `${k.type}_${a}.v0`)));
// A server extension: an ACME order for a name failed (server/ingress/acme/manager.ts).
eventTypes.push('tls_certificate_order_failed.v0');
export { eventTypes };

/** Children of a kind (rules of a policy, routes of an edge). */
export const childrenOf = (kind: string) => catalog.filter((k) => k.parent?.kind === kind);

export type { KindEntry, ModuleEntry } from './define.js';
export { traitsOf, unwrap, shapeOf, defOf } from './traits.js';
