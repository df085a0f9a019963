// A public port speaks TLS to HTTPS and TLS edges alike, the server name choosing the edge,
// or raw TCP to one TCP edge (raw bytes carry no name to choose by), which takes the port
// whole. A hostport on a port a TCP edge holds, or a TCP edge's on a port others hold, is
// refused with 409, in the write transaction; on PostgreSQL the port is locked first, so two
// writers cannot both pass the check.
import { httpsEdge, tcpEdge, tlsEdge } from '../../provider/catalog/edges.js';
import { kindOfId } from '../../provider/catalog/index.js';
import { ApiError } from '../http/errors.js';
import { hostOf, portOf } from '../ingress/table.js';
import { behaviour, type Doc } from './behaviours.js';
import type { Writes } from '../store/hot-writes.js';
import { label } from './engine.js';

const EDGES = [httpsEdge, tcpEdge, tlsEdge];

async function checkPorts(tx: Writes, kind: string, id: string, body: Doc) {
  const ports = [...new Set(((body.hostports ?? []) as string[]).map(portOf))].sort((a, b) => a - b);
  for (const port of ports) {
    await tx.lockName(`edgeform-port:${port}`);
    const held = await tx.keysEndingWith('hostport', `:${port}`, id, 50);
    for (const h of held) {
      const other = kindOfId(h.resourceId);
      // The very same hostport is the unique check's to refuse (ERR_SERVICE_320).
      if (!other || portOf(h.value) !== port || (body.hostports as string[]).includes(h.value)) continue;
      // HTTPS and TLS edges share a port: the ClientHello's server name chooses the edge.
      if (other.kind !== tcpEdge.kind && kind !== tcpEdge.kind) continue;
      const mine = ((body.hostports ?? []) as string[]).find((hp) => portOf(hp) === port)!;
      const why = other.kind === kind ? `a TCP port carries one edge (raw TCP names no host to choose by)` : `a TCP edge takes its port whole (raw TCP names no host to choose by)`;
      throw new ApiError('ERR_SERVICE_700', `hostports: port ${port} of ${mine} is held by ${label(other)} ${h.resourceId} (${hostOf(h.value)}:${port}); ${why}, so use another port for this ${label(EDGES.find((e) => e.kind === kind)!)}`, {
        field: 'hostports',
        value: mine,
        conflicting_id: h.resourceId,
      });
    }
  }
}

for (const edge of EDGES) {
  behaviour(edge.kind, {
    // In the write transaction on update; on create, created() runs in it.
    prepare: async ({ kind, id, body, prior, tx }) => {
      if (prior && tx) await checkPorts(tx, kind.kind, id, body);
    },
    created: async ({ kind, id, body, tx }) => {
      await checkPorts(tx, kind.kind, id, body);
    },
  });
}
