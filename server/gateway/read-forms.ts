// Read-time fields of the live kinds: Refs built from stored ids under the current public
// URL, and the label matches between tunnels and tunnel-group backends (a tunnel serves a
// backend when its labels include all of the backend's labels).
import { tunnelGroupBackend } from '../../provider/catalog/backends.js';
import { credential } from '../../provider/catalog/accounts.js';
import { kindOfId } from '../../provider/catalog/index.js';
import { endpoint, tunnel, tunnelSession } from '../../provider/catalog/tunnels.js';
import { behaviour, type Doc } from '../resources/behaviours.js';
import type { Ctx } from '../resources/context.js';
import type { Rows } from '../store/hot-writes.js';
import { uriOf } from '../resources/engine.js';

type Labels = Record<string, string>;

export const labelsMatch = (wanted: Labels | undefined, have: Labels | undefined) =>
  !!wanted && !!have && Object.keys(wanted).length > 0 && Object.entries(wanted).every(([k, v]) => have[k] === v);

const refTo = (ctx: Ctx, kind: Parameters<typeof uriOf>[1], id: string) => ({ id, uri: uriOf(ctx, kind, id) });

async function rowsOf(rows: Rows, kind: string) {
  return (await rows.ofKind(kind)).map((r) => ({ id: r.id, data: r.data as { body: Doc; computed: Doc } }));
}

behaviour(tunnelSession.kind, {
  read: ({ row, out, ctx }) => {
    // A tunnel credential, or an SSH credential for an ssh session: the Ref's uri follows the id's kind.
    const id = row.computed.credential_id as string;
    out.credential = refTo(ctx, kindOfId(id) ?? credential, id);
  },
});

behaviour(tunnel.kind, {
  read: async ({ row, out, ctx, rows }) => {
    out.tunnel_session = refTo(ctx, tunnelSession, row.parentId!);
    if (row.computed.endpoint_id) out.endpoint = refTo(ctx, endpoint, row.computed.endpoint_id);
    if (row.computed.labels) {
      const backends = await rowsOf(rows, tunnelGroupBackend.kind);
      out.backends = backends.filter((b) => labelsMatch(b.data.body.labels, row.computed.labels)).map((b) => refTo(ctx, tunnelGroupBackend, b.id));
    }
  },
});

behaviour(tunnelGroupBackend.kind, {
  read: async ({ row, out, ctx, rows }) => {
    const tunnels = await rowsOf(rows, tunnel.kind);
    out.tunnels = tunnels.filter((t) => labelsMatch(row.body.labels, t.data.computed.labels)).map((t) => refTo(ctx, tunnel, t.id));
  },
});
