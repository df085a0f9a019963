// A local stand-in for GitHub's OAuth web flow and the REST calls the edge makes, as GitHub
// documents them: /login/oauth/authorize (the "current user" approves at once and is sent back
// with a code and the state), /login/oauth/access_token (JSON with Accept: application/json),
// and under /api: /user, /user/emails, /user/orgs, /user/teams with a Bearer token.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeGithubUser { id: number; login: string; name: string; emails: { email: string; primary: boolean; verified: boolean }[]; orgs: string[]; teams: string[] }

export interface FakeGithub { base: string; api: string; signInAs(u: FakeGithubUser): void; tokenCalls: number; close(): Promise<void> }

export async function startFakeGithub(app: { clientId: string; clientSecret: string }): Promise<FakeGithub> {
  let current: FakeGithubUser | undefined;
  const codes = new Map<string, FakeGithubUser>();
  const tokens = new Map<string, FakeGithubUser>();
  const json = (res: http.ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const fake: FakeGithub = {
    base: '', api: '', tokenCalls: 0,
    signInAs: (u) => { current = u; },
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', fake.base);
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (url.pathname === '/login/oauth/authorize') {
        if (url.searchParams.get('client_id') !== app.clientId || !current) return json(res, 404, { error: 'unknown client' });
        const code = randomBytes(8).toString('hex');
        codes.set(code, current);
        const back = new URL(url.searchParams.get('redirect_uri')!);
        back.searchParams.set('code', code);
        back.searchParams.set('state', url.searchParams.get('state') ?? '');
        return res.writeHead(302, { location: back.href }).end();
      }
      if (url.pathname === '/login/oauth/access_token' && req.method === 'POST') {
        fake.tokenCalls++;
        const p = new URLSearchParams(body);
        const user = codes.get(p.get('code') ?? '');
        codes.delete(p.get('code') ?? '');
        if (p.get('client_id') !== app.clientId || p.get('client_secret') !== app.clientSecret) return json(res, 200, { error: 'incorrect_client_credentials' });
        if (!user) return json(res, 200, { error: 'bad_verification_code' });
        const token = `gho_${randomBytes(8).toString('hex')}`;
        tokens.set(token, user);
        return json(res, 200, { access_token: token, token_type: 'bearer', scope: p.get('scope') ?? '' });
      }
      const user = tokens.get(String(req.headers.authorization ?? '').replace(/^Bearer /, ''));
      if (!user) return json(res, 401, { message: 'Bad credentials' });
      switch (url.pathname) {
        case '/api/user': return json(res, 200, { id: user.id, login: user.login, name: user.name });
        case '/api/user/emails': return json(res, 200, user.emails);
        case '/api/user/orgs': return json(res, 200, user.orgs.map((login) => ({ login })));
        case '/api/user/teams': return json(res, 200, user.teams.map((t) => ({ slug: t.split('/')[1], organization: { login: t.split('/')[0] } })));
        default: return json(res, 404, { message: 'Not Found' });
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.api = `${fake.base}/api`;
  return fake;
}
