// Small behaviours of families that need no file of their own.
import { tunnelGroupBackend } from '../../provider/catalog/backends.js';
import { tunnelSession } from '../../provider/catalog/tunnels.js';
import { behaviour } from './behaviours.js';
import { getResource } from './engine.js';
import { extraRoute } from './routes.js';

// No agents connect yet, so no tunnel matches a backend's labels.
behaviour(tunnelGroupBackend.kind, { read: ({ out }) => { out.tunnels = []; } });

// Agent commands: sessions exist only while an agent is online; none is, so each is 404.
for (const action of tunnelSession.spec.actions ?? []) {
  extraRoute({
    method: 'POST',
    path: `${tunnelSession.path}/{id}/${action}`,
    summary: `Tell the agent of a tunnel session to ${action}`,
    kind: tunnelSession,
    tag: tunnelSession.kind,
    status: 204,
    ignoresBody: true,
    handle: async (ctx, req) => {
      await getResource(ctx, tunnelSession, req.params.id);
    },
  });
}
