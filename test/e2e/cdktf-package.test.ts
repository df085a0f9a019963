// The CDKTF constructs install like a library: the packed tarball is installed into a fresh
// CDKTF project outside this tree (cdktf and constructs as its own dependencies), type-checked
// against the package's declarations, and synthesized from both an ES module and a CommonJS
// program. Offline: the peers are linked from this tree's node_modules, the tarball is local.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_NAME, packConstructs } from '../../provider/cdktf/pack.js';

const root = process.cwd();

describe('the constructs package', () => {
  let tarball: string;
  let project: string;
  beforeAll(() => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-pack-'));
    tarball = packConstructs(root, out);
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-cdktf-project-'));
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({
      name: 'my-edge-stacks', private: true, type: 'module',
      dependencies: {
        [PACKAGE_NAME]: `file:${tarball}`,
        cdktf: `file:${path.join(root, 'node_modules/cdktf')}`,
        constructs: `file:${path.join(root, 'node_modules/constructs')}`,
      },
    }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--install-links=false'], { cwd: project, stdio: 'pipe' });
  }, 180_000);

  it('holds only its compiled files, with an exports map and type declarations, and no path into this tree', () => {
    const installed = path.join(project, 'node_modules', ...PACKAGE_NAME.split('/'));
    const pkg = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8'));
    expect(pkg.exports['.']).toEqual({ types: './dist/esm/index.d.ts', import: './dist/esm/index.js', require: './dist/cjs/index.js' });
    expect(Object.keys(pkg.peerDependencies).sort()).toEqual(['cdktf', 'constructs']);
    expect(pkg.dependencies).toBeUndefined();
    const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
    expect(files).toContain('package/dist/esm/index.d.ts');
    expect(files.every((f) => f.startsWith('package/dist/') || ['package/package.json', 'package/README.md'].includes(f))).toBe(true);
    const text = execFileSync('sh', ['-c', `grep -rl -e '${root}' -e 'provider/catalog' -e 'reconciler/' ${installed}/dist || true`], { encoding: 'utf8' });
    expect(text).toBe('');
  });

  it('type-checks and synthesizes a stack from an ES module', () => {
    fs.writeFileSync(path.join(project, 'main.ts'), `import { App, TerraformStack } from 'cdktf';
import { EdgeformProvider, HttpsEdgeWithRoutes, IpPolicyWithRules, httpResponseBackend, dataEdgeformHttpsEdge } from '${PACKAGE_NAME}';

const app = new App({ outdir: 'cdktf.out' });
const stack = new TerraformStack(app, 'edge');
new EdgeformProvider(stack, 'edgeform');
const office = new IpPolicyWithRules(stack, 'office', { description: 'office', allow: ['203.0.113.0/24'] });
const hello = new httpResponseBackend.HttpResponseBackend(stack, 'hello', { body: 'hi', statusCode: 200 });
new HttpsEdgeWithRoutes(stack, 'web', {
  hostports: ['pkg.example.com:443'],
  routes: { root: { match: '/', matchType: 'path_prefix', backend: { backendId: hello.id }, ipRestriction: { ipPolicyIds: [office.policy.id] } } },
});
new dataEdgeformHttpsEdge.DataEdgeformHttpsEdge(stack, 'existing', { hostports: ['other.example.com:443'] });
app.synth();
`);
    fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, outDir: 'out' }, files: ['main.ts'] }));
    execFileSync(path.join(root, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.json'], { cwd: project, stdio: 'pipe' });
    execFileSync(process.execPath, ['out/main.js'], { cwd: project, stdio: 'pipe' });
    const synth = JSON.parse(fs.readFileSync(path.join(project, 'cdktf.out/stacks/edge/cdk.tf.json'), 'utf8'));
    expect(Object.keys(synth.resource).sort()).toEqual(['edgeform_http_response_backend', 'edgeform_https_edge', 'edgeform_https_edge_route', 'edgeform_ip_policy', 'edgeform_ip_policy_rule']);
    expect(Object.keys(synth.data)).toEqual(['edgeform_https_edge']);
    expect(synth.terraform.required_providers.edgeform.source).toBe('registry.terraform.io/edgeform/edgeform');
  }, 120_000);

  it('is required from a CommonJS program too', () => {
    fs.writeFileSync(path.join(project, 'main.cjs'), `const { App, TerraformStack } = require('cdktf');
const { EdgeformProvider, ipPolicy } = require('${PACKAGE_NAME}');
const app = new App({ outdir: 'cjs.out' });
const stack = new TerraformStack(app, 'cjs');
new EdgeformProvider(stack, 'edgeform');
new ipPolicy.IpPolicy(stack, 'p', { description: 'from require' });
app.synth();
`);
    execFileSync(process.execPath, ['main.cjs'], { cwd: project, stdio: 'pipe' });
    const synth = JSON.parse(fs.readFileSync(path.join(project, 'cjs.out/stacks/cjs/cdk.tf.json'), 'utf8'));
    expect(Object.values(synth.resource.edgeform_ip_policy)).toEqual([expect.objectContaining({ description: 'from require' })]);
  }, 60_000);
});
