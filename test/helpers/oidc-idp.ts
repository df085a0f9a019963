// A real OpenID provider for sign-in tests: oidc-provider on loopback over plain http, with
// one confidential client and one user. Its login and consent steps finish on their own (as a
// user who clicks "sign in" and "allow" would), so a browser-like client only follows redirects.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

export interface TestIdp { issuer: string; close(): Promise<void> }

export async function startOidcIdp(o: { clientId: string; clientSecret: string; redirectUris: string[]; user: { sub: string; email: string; name: string } }): Promise<TestIdp> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const provider = new Provider(issuer, {
    clients: [{ client_id: o.clientId, client_secret: o.clientSecret, redirect_uris: o.redirectUris, token_endpoint_auth_method: 'client_secret_post' }],
    claims: { openid: ['sub'], email: ['email'], profile: ['name'] },
    findAccount: async (_ctx: unknown, id: string) => ({ accountId: id, claims: async () => ({ sub: id, email: o.user.email, name: o.user.name }) }),
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false } },
    cookies: { keys: ['test-cookie-key-0123456789'] },
  } as any);
  const callback = provider.callback();
  server.on('request', async (req, res) => {
    if (!req.url?.startsWith('/interaction/')) return callback(req, res);
    try {
      const details = await provider.interactionDetails(req, res);
      if (details.prompt.name === 'login') {
        await provider.interactionFinished(req, res, { login: { accountId: o.user.sub } }, { mergeWithLastSubmission: false });
        return;
      }
      const grant = new provider.Grant({ accountId: details.session!.accountId, clientId: String(details.params.client_id) });
      grant.addOIDCScope(String(details.params.scope));
      await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
  return {
    issuer,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
