// Module builders and the module bodies shared by routes and edges.
import { z } from 'zod';
import { computed, refId, refIds, trafficPolicyText } from './fields.js';
import { traitsOf, withTraits } from './traits.js';
import type { Refinement } from './define.js';
import { PHASES, type Phase } from './validate/traffic-policy.js';

export const BACKEND_KINDS = ['TunnelGroupBackend', 'HTTPResponseBackend', 'WeightedBackend'] as const;

/**
 * A module field: an optional object with `enabled` (default true); null when unset.
 * Fields with the `computed` trait appear in the read form only: the server sets them
 * (a behaviour fills them at read time), so input that names them is refused.
 */
export function module<S extends z.ZodRawShape>(
  shape: S,
  refine?: Refinement,
  normalize?: (m: Record<string, any>) => Record<string, any>,
) {
  const obj = z.strictObject({ enabled: z.boolean().default(true).describe('Whether the module applies to traffic.'), ...shape });
  const serverSet = Object.keys(shape).filter((k) => traitsOf(shape[k] as z.ZodType).computed);
  const checks: Refinement = (m, ctx) => {
    for (const k of serverSet) {
      if (m[k] !== undefined) ctx.addIssue({ code: 'custom', path: [k], message: `${k} is set by the server; leave it out` });
    }
    refine?.(m, ctx);
  };
  const checked = serverSet.length || refine ? obj.superRefine(checks as never) : obj;
  const normalized = normalize ? checked.transform((m) => normalize(m as Record<string, any>)) : checked;
  return withTraits(normalized.nullable().optional(), { module: true });
}

export const backendModule = () =>
  module({ backend_id: refId(BACKEND_KINDS, { readAs: 'backend', onDelete: 'restrict' }).describe('Backend that serves the traffic.') })
    .describe('Sends the traffic to a backend.');

export const ipRestrictionModule = () =>
  module({
    ip_policy_ids: refIds(['IPPolicy'], { readAs: 'ip_policies', onDelete: 'keep' }).describe('IP policies whose rules restrict access.'),
  }).describe('Allows or denies clients by IP address, with the rules of IP policies.');

/** A traffic policy; `phases` are those that make sense where the module sits. */
export const trafficPolicyModule = (phases: readonly Phase[] = PHASES) =>
  module({ value: trafficPolicyText(phases).describe(`The traffic policy, as YAML or JSON text; phases: ${phases.join(', ')}.`) })
    .describe('Applies a traffic policy (rules of expressions and actions, such as rate limits) to the traffic.');

export const mutualTlsModule = () =>
  module({
    certificate_authority_ids: refIds(['CertificateAuthority'], { readAs: 'certificate_authorities', onDelete: 'restrict' })
      .describe('Certificate authorities that validate client certificates.'),
  }).describe('Requires a TLS client certificate that one of the certificate authorities validates.');

export const TLS_VERSIONS = ['1.0', '1.1', '1.2', '1.3'] as const;

/** HTTPS edges always terminate at the edge; `terminate_at` is read-only there. */
export const httpsTlsTerminationModule = () =>
  module(
    {
      terminate_at: computed(
        z.literal('edge', { error: 'HTTPS edges always terminate TLS at the edge; leave terminate_at out' }).optional(),
      ).describe('Always edge (read-only).'),
      min_version: z.enum(TLS_VERSIONS).nullable().default('1.2').describe('Minimum TLS version accepted: 1.0, 1.1, 1.2 (default) or 1.3.'),
    },
    undefined,
    (m) => ({ ...m, min_version: m.min_version ?? '1.2' }),
  ).describe('TLS termination at the edge, with the minimum TLS version accepted.');

export const tlsTerminationModule = () =>
  module(
    {
      terminate_at: z.enum(['edge', 'agent', 'upstream']).default('edge').describe('Where TLS terminates.'),
      min_version: z.enum(TLS_VERSIONS).nullable().optional().describe('Minimum TLS version: 1.0, 1.1, 1.2 or 1.3; must be null when terminate_at is upstream (default 1.2 otherwise).'),
    },
    (m, ctx) => {
      if (m.terminate_at === 'upstream' && m.min_version != null) {
        ctx.addIssue({ code: 'custom', path: ['min_version'], message: 'min_version must be null when terminate_at is upstream' });
      }
    },
    (m) => ({ ...m, min_version: m.min_version ?? (m.terminate_at === 'upstream' ? null : '1.2') }),
  ).describe('Where TLS is terminated (edge, agent or upstream), with the minimum TLS version accepted.');
