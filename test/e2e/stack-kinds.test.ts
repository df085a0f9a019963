// GET /_edgeform/stack_kinds/{stack} (docs/api.md, "Stack kinds"): the kinds holding
// resources stamped by a stack, on both databases. A stamp is the one the reconciler
// writes and reads (reconciler/live/stamp.ts); metadata that only mentions the stack's
// name, another stack's stamp, or a name that LIKE's wildcards would match, never counts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeMetadata } from '../../reconciler/live/stamp.js';
import { DATABASES, pgAvailable, serverOn } from '../helpers/databases.js';
import type { TestServer } from '../helpers/server.js';

if (!pgAvailable) console.warn('\n*** SKIPPING stack kinds on PostgreSQL: initdb is not on the PATH ***\n');

const stamp = (stack: string, name: string, user = '') => encodeMetadata(user, { stack, name });

describe.each(DATABASES)('GET /_edgeform/stack_kinds on $db', ({ db, skip }) => {
  let server: Awaited<ReturnType<typeof serverOn>> | undefined;
  let s: TestServer;
  const kinds = async (stack: string) => {
    const r = await s.get(`/_edgeform/stack_kinds/${stack}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.stack).toBe(stack);
    return r.body.kinds;
  };

  beforeAll(async () => {
    if (skip) return;
    server = await serverOn(db, 'stackkinds');
    s = server.s;
    const post = async (path: string, body: Record<string, unknown>) => {
      const r = await s.post(path, body);
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body;
    };
    // Stack "a_b": a policy and, in another policy no stack stamped, a rule.
    await post('/ip_policies', { metadata: stamp('a_b', 'IPPolicy/office', '{"team":"net"}') });
    const bare = await post('/ip_policies', { description: 'no stack' });
    await post('/ip_policy_rules', { ip_policy_id: bare.id, cidr: '10.0.0.0/8', action: 'allow', metadata: stamp('a_b', 'IPPolicy/office.rules["10.0.0.0/8"]') });
    // Stack "other": a backend, after many that only mention "a_b", so confirming takes more than one batch.
    for (let i = 0; i < 101; i++) await post('/backends/http_response', { body: 'x', status_code: 200, metadata: JSON.stringify({ edgeform: { stack: 'other' }, note: 'a_b' }) });
    await post('/backends/http_response', { body: 'y', status_code: 200, metadata: stamp('other', 'HTTPResponseBackend/y') });
    // Mentions of "a_b" that are not its stamp: a user's text, another stack's stamp naming it, a stamp in the wrong shape.
    await post('/backends/tunnel_group', { metadata: '{"edgeform": "a_b"}' });
    await post('/bot_users', { name: 'bot', metadata: stamp('axb', 'BotUser/a_b') });
    await post('/backends/weighted', { backends: {}, metadata: 'managed by stack "a_b" with "edgeform"' });
  }, 120_000);

  afterAll(async () => {
    await server?.close();
  });

  it.skipIf(skip)('names each kind holding a resource stamped by the stack, children as kinds of their own, in catalog order', async () => {
    expect(await kinds('a_b')).toEqual(['IPPolicy', 'IPPolicyRule']);
    expect(await kinds('other')).toEqual(['HTTPResponseBackend']);
    expect(await kinds('axb')).toEqual(['BotUser']);
  });

  it.skipIf(skip)('a stack with nothing stamped, and one whose name differs only in case, hold no kinds', async () => {
    expect(await kinds('nothing')).toEqual([]);
    expect(await kinds('A_B')).toEqual([]);
  });

  it.skipIf(skip)('a name that is not a stack name is 400 naming the field', async () => {
    const r = await s.get('/_edgeform/stack_kinds/no%20spaces');
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error_code: 'ERR_SERVICE_103', details: { field: 'stack' } });
  });
});
