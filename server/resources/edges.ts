// Edge and route behaviours the catalog cannot express: the values of computed module
// fields. HTTPS edges always terminate TLS at the edge; a route's SAML module gets a
// service-provider identity (URLs under the public base URL and a request-signing
// certificate whose private key stays sealed with the route).
import { httpsEdge, httpsEdgeRoute } from '../../provider/catalog/edges.js';
import { generateKeyAsync, issueCertificate } from '../crypto/x509-build.js';
import { samlUrls } from '../ingress/auth/saml-metadata.js';
import { behaviour, type Doc, type StoredResource } from './behaviours.js';

behaviour(httpsEdge.kind, {
  read: ({ out }) => {
    if (out.tls_termination) out.tls_termination.terminate_at = 'edge';
  },
});

/** The sealed SAML signing identity of a route. */
interface SamlIdentity { certificate_pem: string; private_key_pem: string }

/** Where the route keeps the public copy of its SAML signing certificate (not part of the read form). */
const CERTIFICATE = 'saml_request_signing_certificate_pem';

/** Routes written before the public copy existed: from the sealed value, or null when that cannot be opened. */
function legacyCertificate(row: StoredResource): string | null {
  try {
    return (row.internal.saml as SamlIdentity | undefined)?.certificate_pem ?? null;
  } catch {
    return null;
  }
}

/** Ten years: the certificate identifies the route to the IdP, which pins it; rotating it breaks logins. */
const SIGNING_CERTIFICATE_DAYS = 3650;

async function samlIdentity(routeId: string): Promise<SamlIdentity> {
  const cert = issueCertificate({
    keyPair: await generateKeyAsync({ type: 'rsa', bits: 2048 }),
    subject: { commonName: `SAML request signing for ${routeId}`, organization: 'edgeform' },
    days: SIGNING_CERTIFICATE_DAYS,
    keyUsages: ['digital_signature'],
  });
  return { certificate_pem: cert.certificatePem, private_key_pem: cert.privateKeyPem };
}

behaviour(httpsEdgeRoute.kind, {
  // The identity is made once, when SAML is first set, and kept while it stays set, so
  // replacing the module's settings does not change what the IdP has pinned.
  prepare: async ({ id, body, prior }) => {
    const internal: Doc = { ...prior?.internal };
    if (body.saml == null) delete internal.saml;
    else internal.saml ??= await samlIdentity(id);
    // The certificate is public: a copy outside the sealed value lets reads show it without unsealing.
    const computed: Doc = { ...prior?.computed, [CERTIFICATE]: (internal.saml as SamlIdentity | undefined)?.certificate_pem };
    return { internal, computed };
  },
  read: ({ row, out, ctx }) => {
    if (!out.saml) return;
    // Served by the API server (server/http/saml-endpoints.ts) and by the edge (docs/ingress.md, SAML).
    Object.assign(out.saml, samlUrls(ctx.publicUrl, row.id));
    out.saml.request_signing_certificate_pem = row.computed[CERTIFICATE] ?? legacyCertificate(row);
  },
});
