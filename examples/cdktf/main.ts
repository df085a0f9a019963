// A CDKTF stack for edgeform: an office IP policy, a maintenance backend, and an HTTPS edge
// whose routes use them. `npx tsx examples/cdktf/main.ts` synthesizes it into
// cdktf.out/stacks/edge (set CDKTF_OUTDIR to change that); deploy with terraform there.
import path from 'node:path';
import { App, LocalBackend, TerraformOutput, TerraformStack } from 'cdktf';
import type { Construct } from 'constructs';
import { EdgeformProvider, HttpsEdgeWithRoutes, IpPolicyWithRules, httpResponseBackend } from '../../provider/cdktf/index.js';

export class EdgeStack extends TerraformStack {
  constructor(scope: Construct, id: string, opts: { hostname: string }) {
    super(scope, id);
    // State beside cdk.tf.json (cdktf's default is an absolute path under the current folder).
    new LocalBackend(this, { path: 'terraform.tfstate' });
    // api_url and api_key come from EDGEFORM_API_URL and EDGEFORM_API_KEY, so no secret is synthesized.
    new EdgeformProvider(this, 'edgeform');

    const office = new IpPolicyWithRules(this, 'office', {
      description: 'office networks',
      allow: ['203.0.113.0/24', '2001:db8::/48'],
      deny: ['203.0.113.66'],
    });
    const maintenance = new httpResponseBackend.HttpResponseBackend(this, 'maintenance', {
      body: 'down for maintenance',
      headers: { 'Retry-After': '120' },
      statusCode: 503,
    });
    const web = new HttpsEdgeWithRoutes(this, 'web', {
      description: 'public site',
      hostports: [`${opts.hostname}:443`],
      tlsTermination: { minVersion: '1.3' },
      routes: {
        root: {
          matchType: 'path_prefix',
          match: '/',
          backend: { backendId: maintenance.id },
          compression: {},
        },
        admin: {
          matchType: 'path_prefix',
          match: '/admin',
          backend: { backendId: maintenance.id },
          ipRestriction: { ipPolicyIds: [office.id] },
          responseHeaders: { add: { 'Cache-Control': 'no-store' } },
        },
      },
    });
    new TerraformOutput(this, 'edge_id', { value: web.id });
  }
}

// Its own hostname by default, so it deploys beside the README's manifest and Terraform quick starts.
export function synth(outdir: string, hostname = 'cdktf.example.com') {
  const app = new App({ outdir });
  new EdgeStack(app, 'edge', { hostname });
  app.synth();
  return path.join(outdir, 'stacks', 'edge');
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const dir = synth(process.env.CDKTF_OUTDIR ?? 'cdktf.out');
  process.stdout.write(`synthesized ${path.join(dir, 'cdk.tf.json')}\n`);
}
