// The SAML module's SP URLs where its read form says they are, under the public base URL
// (`/saml/<route id>`): the entity id and metadata_url answer the SP metadata; the ACS takes the
// IdP's POST and relays it (307, the body kept) to the edge's own host, where the assertion is
// verified and the session cookie set for that host; the SLO sends the browser to the route's
// logout path on the edge host. No API key: an IdP and a browser call these. The edge host is
// the RelayState's when it is one of the edge's hostports, else the edge's first hostport.
import type { FastifyInstance } from 'fastify';
import { httpsEdge, httpsEdgeRoute } from '../../provider/catalog/edges.js';
import { CALLBACK_PATH, STATE_ROUTE_SEPARATOR } from '../ingress/auth/callback-route.js';
import { SAML_PATH_PREFIX, samlUrls, serviceProviderMetadata } from '../ingress/auth/saml-metadata.js';
import { LOGOUT_PATH } from '../ingress/auth/sign-in-filter.js';
import { toStored, type Row } from '../resources/engine.js';
import type { ServerContext } from '../resources/context.js';
import { ApiError } from './errors.js';

export { SAML_PATH_PREFIX };

interface SamlRoute { id: string; saml: Record<string, any>; match_type: string; match: string; signing: { certificate_pem: string; private_key_pem: string }; hostports: string[] }

async function samlRoute(server: ServerContext, id: string): Promise<SamlRoute> {
  const none = new ApiError('ERR_SERVICE_816', `no HTTPS edge route ${JSON.stringify(id.slice(0, 64))} with a SAML module`);
  const row = await server.db.read.resource.findUnique({ where: { id } });
  if (!row || row.kind !== httpsEdgeRoute.kind || !row.parentId) throw none;
  const route = toStored(server, row as Row);
  const signing = route.internal.saml;
  if (!route.body.saml || route.body.saml.enabled === false || !signing) throw none;
  const edge = await server.db.read.resource.findUnique({ where: { id: row.parentId } });
  if (!edge || edge.kind !== httpsEdge.kind) throw none;
  const hostports = ((edge.data as { body: { hostports?: string[] } }).body.hostports ?? []);
  return { id, saml: route.body.saml, match_type: route.body.match_type, match: route.body.match, signing, hostports };
}

/** `https://host[:port]` of the hostport the RelayState names, else of the edge's first one. */
function edgeOrigin(hostports: string[], relay: string | undefined): string {
  const origins = hostports.map((hp) => (hp.endsWith(':443') ? `https://${hp.slice(0, -4)}` : `https://${hp}`).toLowerCase());
  let asked: string | undefined;
  try {
    asked = relay ? new URL(relay).origin.toLowerCase() : undefined;
  } catch {
    asked = undefined;
  }
  const origin = origins.find((o) => o === asked) ?? origins[0];
  if (!origin) throw new ApiError('ERR_SERVICE_816', 'the SAML route\'s edge has no hostports to sign in on');
  return origin;
}

const formValue = (body: unknown, name: string) => (typeof body === 'string' ? new URLSearchParams(body).get(name) ?? undefined : undefined);

export async function samlEndpoints(app: FastifyInstance, opts: { server: ServerContext }) {
  const { server } = opts;
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, text, done) => done(null, String(text)));

  const metadata = async (request: { params: unknown }, reply: import('fastify').FastifyReply) => {
    const r = await samlRoute(server, (request.params as { id: string }).id);
    return reply
      .type('application/samlmetadata+xml; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(serviceProviderMetadata(samlUrls(server.publicUrl, r.id), r.saml.nameid_format, r.signing));
  };
  app.get(`${SAML_PATH_PREFIX}:id`, metadata);
  app.get(`${SAML_PATH_PREFIX}:id/metadata`, metadata);

  app.post(`${SAML_PATH_PREFIX}:id/acs`, async (request, reply) => {
    const r = await samlRoute(server, (request.params as { id: string }).id);
    const to = `${edgeOrigin(r.hostports, formValue(request.body, 'RelayState'))}${CALLBACK_PATH}?state=${encodeURIComponent(`${r.id}${STATE_ROUTE_SEPARATOR}acs`)}`;
    return reply.code(307).header('location', to).header('cache-control', 'no-store').type('text/plain; charset=utf-8').send(`Relaying the SAML response to ${to}\n`);
  });

  const slo = async (request: { params: unknown; query: unknown; body?: unknown }, reply: import('fastify').FastifyReply) => {
    const r = await samlRoute(server, (request.params as { id: string }).id);
    const relay = (request.query as Record<string, string | undefined>).RelayState ?? formValue(request.body, 'RelayState');
    const prefix = r.match_type === 'path_prefix' ? String(r.match).replace(/\/+$/, '') : '';
    const to = `${edgeOrigin(r.hostports, relay)}${prefix}${LOGOUT_PATH}`;
    return reply.code(303).header('location', to).header('cache-control', 'no-store').type('text/plain; charset=utf-8').send(`Signing out at ${to}\n`);
  };
  app.get(`${SAML_PATH_PREFIX}:id/slo`, slo);
  app.post(`${SAML_PATH_PREFIX}:id/slo`, slo);
}
