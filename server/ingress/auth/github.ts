// What GitHub adds to the table's OAuth flow (oauth-providers.ts, oauth.ts), as GitHub
// documents its REST API: the user's verified emails from <api>/user/emails (GitHub's /user
// shows only a public one), and, when the route lists organizations or teams, the scope
// read:org and <api>/user/orgs and <api>/user/teams (first 100 of each).
import type { FullDoc } from '../types.js';
import type { OAuthExtras } from './oauth.js';

export function githubExtras(m: FullDoc[string], api: string): OAuthExtras {
  const needsOrgs = (m.organizations?.length ?? 0) + (m.teams?.length ?? 0) > 0;
  return {
    scopes: needsOrgs ? ['read:org'] : [],
    async more(get) {
      const emails = (await get<{ email: string; primary: boolean; verified: boolean }[]>(`${api}/user/emails`)).filter((e) => e.verified);
      const ordered = [...emails.filter((e) => e.primary), ...emails.filter((e) => !e.primary)].map((e) => e.email);
      if (!needsOrgs) return { emails: ordered };
      const orgs = (await get<{ login: string }[]>(`${api}/user/orgs?per_page=100`)).map((o) => o.login);
      const teams = (await get<{ slug: string; organization: { login: string } }[]>(`${api}/user/teams?per_page=100`)).map((t) => `${t.organization.login}/${t.slug}`);
      return { emails: ordered, orgs, teams };
    },
  };
}
