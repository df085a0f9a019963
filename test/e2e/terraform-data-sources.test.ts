// Terraform data sources, through the real terraform binary: one per kind that can be looked
// up, by id, by natural key, by metadata, and a child by its parent and key; a lookup that
// matches none or several is an error that says so.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataSourceTypes } from '../../provider/terraform/data-source.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { hasTerraform, workspace } from '../helpers/terraform.js';

describe('data source types', () => {
  it('cover every kind that can be read, with the natural key as a lookup', () => {
    const names = dataSourceTypes.map((d) => d.typeName);
    for (const t of ['edgeform_ip_policy', 'edgeform_ip_policy_rule', 'edgeform_https_edge', 'edgeform_https_edge_route', 'edgeform_tcp_edge', 'edgeform_tls_edge', 'edgeform_bot_user', 'edgeform_tunnel', 'edgeform_tunnel_session', 'edgeform_cloud_endpoint', 'edgeform_weighted_backend']) expect(names).toContain(t);
    expect(dataSourceTypes.find((d) => d.typeName === 'edgeform_https_edge')!.lookups).toEqual(['id', 'hostports', 'metadata']);
    expect(dataSourceTypes.find((d) => d.typeName === 'edgeform_https_edge_route')!.parent).toBe('edge_id');
    // Every attribute is computed; only lookups may be set.
    for (const d of dataSourceTypes) for (const a of d.node.attributes) expect(a.computed || a.role === 'parent').toBe(true);
  });
});

describe.skipIf(!hasTerraform)('terraform data sources', () => {
  let server: TestServer;
  let ids: Record<string, string>;
  beforeAll(async () => {
    server = await startTestServer();
    const office = (await server.post('/ip_policies', { description: 'office', metadata: 'team=net' })).body;
    await server.post('/ip_policies', { description: 'vpn', metadata: 'team=net' });
    const rule = (await server.post('/ip_policy_rules', { ip_policy_id: office.id, cidr: '10.0.0.0/8', action: 'allow' })).body;
    const backend = (await server.post('/backends/http_response', { body: 'hi', status_code: 200 })).body;
    const edge = (await server.post('/edges/https', { hostports: ['app.example.com:443', 'www.example.com:443'], description: 'web' })).body;
    const route = (await server.post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/api', backend: { backend_id: backend.id } })).body;
    ids = { office: office.id, rule: rule.id, edge: edge.id, route: route.id, backend: backend.id };
  });
  afterAll(() => server?.close());

  it('looks items up by id, natural key, metadata and parent, and shows their values', async () => {
    const tf = await workspace(server);
    tf.write(`data "edgeform_https_edge" "web" {
  hostports = ["app.example.com:443"]
}
data "edgeform_https_edge_route" "api" {
  edge_id = data.edgeform_https_edge.web.id
  match   = "/api"
}
data "edgeform_ip_policy" "office" {
  id = "${ids.office}"
}
data "edgeform_ip_policy_rule" "lan" {
  ip_policy_id = data.edgeform_ip_policy.office.id
  cidr         = "10.0.0.0/8"
}
output "edge_id" { value = data.edgeform_https_edge.web.id }
output "edge_hostports" { value = data.edgeform_https_edge.web.hostports }
output "route_backend" { value = data.edgeform_https_edge_route.api.backend.backend_id }
output "office" { value = data.edgeform_ip_policy.office.description }
output "rule" { value = data.edgeform_ip_policy_rule.lan.id }
`);
    await tf.apply();
    const out = JSON.parse((await tf.ok(['output', '-json'])).stdout);
    expect(out.edge_id.value).toBe(ids.edge);
    expect(out.edge_hostports.value).toEqual(['app.example.com:443', 'www.example.com:443']);
    expect(out.route_backend.value).toBe(ids.backend);
    expect(out.office.value).toBe('office');
    expect(out.rule.value).toBe(ids.rule);
  }, 120_000);

  it('refuses a lookup that matches several, or none, saying how many and what narrows it', async () => {
    const tf = await workspace(server);
    tf.write(`data "edgeform_ip_policy" "net" {
  metadata = "team=net"
}
`);
    const several = await tf.run('plan', '-input=false');
    expect(several.code).toBe(1);
    expect(several.stderr).toMatch(/2 edgeform_ip_policy items match/);
    expect(several.stderr).toMatch(/Set\s+id\s+to\s+pick\s+one/);
    tf.write(`data "edgeform_https_edge" "none" {
  hostports = ["nowhere.example.com:443"]
}
`);
    const none = await tf.run('plan', '-input=false');
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/No edgeform_https_edge matches/);
    tf.write(`data "edgeform_ip_policy" "gone" {
  id = "ipp_2zzzzzzzzzzzzzzzzzzzzzzzzzz"
}
`);
    const missing = await tf.run('plan', '-input=false');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/No edgeform_ip_policy with id ipp_2zzzzzzzzzzzzzzzzzzzzzzzzzz/);
  }, 120_000);
});
