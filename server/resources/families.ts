// Small behaviours of families that need no file of their own.
import { tunnelSession } from '../../provider/catalog/tunnels.js';
import { getResource } from './engine.js';
import { extraRoute } from './routes.js';

// Agent commands (server/gateway): 204 once the agent acknowledged; 404 when the session is not online.
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
      await ctx.gateway?.command(req.params.id, action as 'stop' | 'restart' | 'update');
    },
  });
}
