// Packs the CDKTF constructs as a library another repository can depend on: `@edgeform/cdktf`,
// compiled to ESM and CommonJS with type declarations and an `exports` map, cdktf and
// constructs as peer dependencies, and nothing that points back into this tree.
//   npx tsx provider/cdktf/pack.ts      writes dist/edgeform-cdktf-<version>.tgz
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const PACKAGE_NAME = '@edgeform/cdktf';

/** The files of the package: the constructs and the generated bindings, nothing else. */
const SOURCES = ['index.ts', 'https-edge-with-routes.ts', 'ip-policy-with-rules.ts', 'gen'];

function compile(root: string, src: string, outDir: string, module: 'NodeNext' | 'CommonJS', declarations: boolean) {
  const config = path.join(src, `tsconfig.${module}.json`);
  fs.writeFileSync(config, JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module, moduleResolution: module === 'CommonJS' ? 'Node10' : 'NodeNext', strict: true, skipLibCheck: true, esModuleInterop: true,
      outDir, rootDir: src, declaration: declarations, emitDeclarationOnly: false, sourceMap: false, types: [],
      typeRoots: [],
    },
    include: ['**/*.ts'],
  }));
  execFileSync(path.join(root, 'node_modules/.bin/tsc'), ['-p', config], { stdio: 'inherit' });
}

export function packConstructs(root = process.cwd(), outDir = path.join(root, 'dist')): string {
  const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version as string;
  const stage = path.join(outDir, 'cdktf-package');
  fs.rmSync(stage, { recursive: true, force: true });
  const src = path.join(stage, 'src');
  fs.mkdirSync(src, { recursive: true });
  for (const s of SOURCES) fs.cpSync(path.join(root, 'provider/cdktf', s), path.join(src, s), { recursive: true });
  // NodeNext emits ESM only for sources it knows are ESM, wherever the staging folder is.
  fs.writeFileSync(path.join(src, 'package.json'), '{ "type": "module" }\n');
  // cdktf and constructs resolve from this tree's node_modules while compiling; the package only names them as peers.
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(stage, 'node_modules'), 'dir');
  compile(root, src, path.join(stage, 'dist/esm'), 'NodeNext', true);
  compile(root, src, path.join(stage, 'dist/cjs'), 'CommonJS', false);
  fs.rmSync(src, { recursive: true, force: true });
  fs.rmSync(path.join(stage, 'node_modules'));
  // The ESM folder is ESM whatever the consumer's package says; the CommonJS one likewise.
  fs.writeFileSync(path.join(stage, 'dist/esm/package.json'), '{ "type": "module" }\n');
  fs.writeFileSync(path.join(stage, 'dist/cjs/package.json'), '{ "type": "commonjs" }\n');
  const cdktfVersion = JSON.parse(fs.readFileSync(path.join(root, 'node_modules/cdktf/package.json'), 'utf8')).version as string;
  const constructsVersion = JSON.parse(fs.readFileSync(path.join(root, 'node_modules/constructs/package.json'), 'utf8')).version as string;
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify({
    name: PACKAGE_NAME,
    version,
    description: 'CDKTF constructs for edgeform: one class per resource type (generated from the provider schema) and higher-level constructs such as HttpsEdgeWithRoutes.',
    license: 'MIT',
    type: 'module',
    main: './dist/cjs/index.js',
    types: './dist/esm/index.d.ts',
    exports: {
      '.': { types: './dist/esm/index.d.ts', import: './dist/esm/index.js', require: './dist/cjs/index.js' },
      './package.json': './package.json',
    },
    files: ['dist', 'README.md'],
    peerDependencies: { cdktf: `^${cdktfVersion}`, constructs: `^${constructsVersion.split('.')[0]}.0.0` },
    engines: { node: '>=20' },
  }, null, 2)}\n`);
  fs.writeFileSync(path.join(stage, 'README.md'), `# ${PACKAGE_NAME}\n\nCDKTF constructs for edgeform (provider \`edgeform/edgeform\`). See the edgeform README, "CDKTF quick start".\n\n\`\`\`ts\nimport { EdgeformProvider, HttpsEdgeWithRoutes, IpPolicyWithRules, httpResponseBackend } from '${PACKAGE_NAME}';\n\`\`\`\n`);
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', outDir], { cwd: stage, encoding: 'utf8' }).trim().split('\n').pop()!;
  return path.join(outDir, out);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  process.stderr.write(`packed ${packConstructs()}\n`);
}
