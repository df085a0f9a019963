// What a user meets at the edges of the commands: --json readers get one JSON document on
// stdout even for a mistyped option, a wrong --api-url or a manifest given as a saved plan
// is told what to type instead, a mistyped folder declares no deletions, and an apply that
// waits (a rate limit) keeps saying so.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestDir, runCli } from '../helpers/cli.js';
import { startCli } from '../helpers/cli-process.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { toYaml } from '../helpers/reconciler.js';

const MANIFEST = manifestDir({ 'web.yaml': toYaml([{ kind: 'IPPolicy', name: 'office', rules: [{ cidr: '203.0.113.0/24', action: 'allow' }] }]) });
const ENV = { EDGEFORM_API_URL: 'http://127.0.0.1:9', EDGEFORM_API_KEY: 'any-token' };

describe('--json on a usage error: one JSON document on stdout, exit 2 (1 with --detailed-exitcode)', () => {
  it.each([
    { case: 'an unknown option, which commander refuses', args: ['plan', '-f', MANIFEST, '--json', '--bogus'], code: 2, error: /unknown option '--bogus'/ },
    { case: 'a bad --parallelism', args: ['apply', '-f', MANIFEST, '--json', '--parallelism', '0'], code: 2, error: /--parallelism/ },
    { case: 'a bad option of destroy', args: ['destroy', '-f', MANIFEST, '--json', '--parallelism', 'many'], code: 2, error: /--parallelism/ },
    { case: 'an extra argument to validate', args: ['validate', '-f', MANIFEST, '--json', 'extra'], code: 2, error: /too many arguments/ },
    { case: 'with --detailed-exitcode, 2 means changes, so a usage error is 1', args: ['plan', '-f', MANIFEST, '--json', '--detailed-exitcode', '--bogus'], code: 1, error: /unknown option/ },
    { case: 'an --api-url that is not a URL is found before any call', args: ['plan', '-f', MANIFEST, '--json', '--api-url', '127.0.0.1:8080'], code: 2, error: /--api-url \/ EDGEFORM_API_URL must be the server's http\(s\) base URL/ },
  ])('$case', async (c) => {
    const r = await runCli(c.args, ENV);
    expect(r.code, r.stderr).toBe(c.code);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.json().error).toMatch(c.error);
  });
});

describe('apply and destroy --json on a terminal', () => {
  it.each(['apply', 'destroy'])('%s --json without --auto-approve is a usage error, before any call: the prompt would break the one JSON document', async (command) => {
    // A terminal that would answer yes, and an API address where nothing listens.
    const r = await runCli([command, '-f', MANIFEST, '--json'], ENV, 'yes');
    expect(r.code).toBe(2);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.json().error).toBe(`${command} --json needs --auto-approve: the confirmation prompt cannot share stdout with the JSON document (review with "edgeform plan --json" first, or save a plan with "plan --out FILE" and apply that file)`);
    expect(r.stdout).not.toContain('Do you want to perform these actions?');
  });
});

describe('a reader that stops early (edgeform ... | head)', () => {
  it('stops quietly, exit 0, with no stack trace, when standard output is closed before it writes', async () => {
    const p = startCli(['plan', '--help']);
    p.child.stdout!.destroy();
    expect(await p.exited).toBe(0);
    expect(p.stderr).toBe('');
  });
});

describe('what to type instead', () => {
  it.each([
    { case: 'no scheme: the URL would be read as a path', url: '127.0.0.1:8080' },
    { case: 'not a URL at all', url: 'edgeform-server' },
    { case: 'another scheme', url: 'ftp://127.0.0.1:8080' },
  ])('--api-url $url ($case): exit 2, naming the form wanted', async ({ url }) => {
    const r = await runCli(['plan', '-f', MANIFEST, '--api-url', url], ENV);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`must be the server's http(s) base URL, such as http://127.0.0.1:8080, not "${url}"`);
  });

  it('apply FILE.yaml (kubectl habit): says it is a manifest and to give it with -f', async () => {
    const file = `${MANIFEST}/web.yaml`;
    for (const args of [['apply', file], ['apply', MANIFEST]]) {
      const r = await runCli(args, ENV);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`is a manifest, not a plan saved by "edgeform plan --out"; to apply manifests, give them with -f: edgeform apply -f ${args[1]}`);
    }
  });
});

describe('against a server', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('a folder with no manifests is refused, not read as "declare nothing": apply --prune on a mistyped folder must not delete the stack', async () => {
    const env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, EDGEFORM_STACK: 'manners' };
    expect((await runCli(['apply', '-f', MANIFEST, '--auto-approve'], env)).code).toBe(0);
    const empty = manifestDir({ 'README.md': '# notes, no manifests\n' });
    for (const command of [['validate'], ['plan', '--prune'], ['apply', '--prune', '--auto-approve'], ['destroy', '--auto-approve']]) {
      const r = await runCli([...command, '-f', empty], env);
      expect(r.code, command.join(' ')).toBe(1);
      expect(r.stderr).toContain(`${empty}: no *.yaml or *.yml files in this folder (or below)`);
    }
    expect((await s.get('/ip_policies')).body.ip_policies).toHaveLength(1);
    // An empty file still declares nothing on purpose.
    const nothing = manifestDir({ 'none.yaml': '' });
    expect((await runCli(['validate', '-f', nothing], env)).stdout).toContain('Success! 0 documents valid.');
  });

  it('plan --out into a folder that does not exist names the folder, not ENOENT', async () => {
    const r = await runCli(['plan', '-f', MANIFEST, '--out', '/nonexistent-edgeform/p.plan'], { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('Error: cannot save the plan to /nonexistent-edgeform/p.plan (no folder /nonexistent-edgeform); give --out a file in a folder that exists and you can write to\n');
  });

  it('an --api-url with a path the server does not serve names the base URL wanted', async () => {
    const r = await runCli(['plan', '-f', MANIFEST, '--api-url', `${s.url}/v1`], { EDGEFORM_API_KEY: s.token });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/404 ERR_SERVICE_301/);
    expect(r.stderr).toContain(`set --api-url or EDGEFORM_API_URL to the server's base URL, with no path (such as http://127.0.0.1:8080), not ${s.url}/v1`);
  });

  it('an https:// --api-url for a plain-HTTP server says so, not an OpenSSL record error', async () => {
    const r = await runCli(['plan', '-f', MANIFEST, '--api-url', s.url.replace('http:', 'https:')], { EDGEFORM_API_KEY: s.token });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('(the TLS handshake failed: a plain-HTTP server at an https:// URL?)');
    expect(r.stderr).not.toMatch(/SSL routines/);
  });

  it('a document renamed but matched by its natural key: the update names the old address and says it rewrites only the stamp', async () => {
    const env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token };
    const edge = (name: string) => manifestDir({ 'e.yaml': toYaml([{ kind: 'HTTPSEdge', name, hostports: ['rename.example.com:443'] }]) });
    expect((await runCli(['apply', '-f', edge('before'), '--stack', 'rename', '--auto-approve'], env)).code).toBe(0);
    const renamed = await runCli(['plan', '-f', edge('after'), '--stack', 'rename'], env);
    expect(renamed.stdout).toContain('~ HTTPSEdge/after');
    expect(renamed.stdout).toContain('# (moved from HTTPSEdge/before)');
    expect(renamed.stdout).toContain("(no field changes: only edgeform's ownership stamp in metadata, which will record it as HTTPSEdge/after instead of HTTPSEdge/before)");
    // As terraform show -json: the address it had.
    const json = await runCli(['plan', '-f', edge('after'), '--stack', 'rename', '--json'], env);
    expect(JSON.parse(json.stdout).resource_changes).toEqual([expect.objectContaining({ address: 'HTTPSEdge/after', previous_address: 'HTTPSEdge/before', change: expect.objectContaining({ actions: ['update'] }) })]);
  });
});

describe('progress on a terminal', () => {
  it('each finished change says how far the run is, [N/M]; not when the output is a file or a pipe', async () => {
    const s = await startTestServer();
    try {
      const env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token };
      const dir = manifestDir({ 'p.yaml': toYaml(['a', 'b', 'c'].map((name) => ({ kind: 'IPPolicy', name }))) });
      const r = await runCli(['apply', '-f', dir, '--auto-approve'], env, undefined, { counting: { out: true, err: false } });
      expect(r.code, r.stderr).toBe(0);
      const counts = [...r.stdout.matchAll(/^\[(\d+)\/3\] IPPolicy\/[abc]: Creation complete/gm)].map((m) => Number(m[1]));
      expect(counts).toEqual([1, 2, 3]);
      const more = manifestDir({ 'p.yaml': toYaml(['a', 'b', 'c', 'd'].map((name) => ({ kind: 'IPPolicy', name }))) });
      const piped = await runCli(['apply', '-f', more, '--auto-approve'], env, undefined, { counting: { out: false, err: false } });
      expect(piped.code, piped.stderr).toBe(0);
      expect(piped.stdout).toContain('IPPolicy/d: Creation complete');
      expect(piped.stdout).not.toMatch(/^\[\d+\/\d+\]/m);
    } finally {
      await s.close();
    }
  });
});

describe('progress while apply waits on the rate limit', () => {
  let s: TestServer;
  beforeAll(async () => {
    // The stack lock and the plan's reads (the kinds holding the stack's resources, the
    // policies and their rules), then nothing more for 2 s: the apply's creates wait
    // seconds for Retry-After.
    s = await startTestServer({ apiRateLimit: 4, apiRateWindowMs: 2000 });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('prints "Still creating... [Ns elapsed]" for what is in flight and names the rate limit it waits on; with --json on stderr, stdout stays one document', async () => {
    const dir = manifestDir({ 'p.yaml': toYaml(['a', 'b', 'c'].map((name) => ({ kind: 'IPPolicy', name }))) });
    const env = { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token };
    const r = await runCli(['apply', '-f', dir, '--auto-approve', '--json'], env, undefined, { stillEvery: 200 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^IPPolicy\/[abc]: Still creating\.\.\. \[\d+s elapsed\]$/m);
    // What it waits on is named, with the server's setting that bounds it.
    expect(r.stderr).toMatch(/^Waiting \d+s for the server's API rate limit for this key \(its --api-rate-limit \/ EDGEFORM_API_RATE_LIMIT, 600 requests a minute by default\); the calls go on after it$/m);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.json().applied).toEqual({ add: 3, change: 0, destroy: 0 });
    // Nothing is reported as still running once it is over.
    const lines = r.stderr.trim().split('\n');
    for (const name of ['a', 'b', 'c']) {
      const done = lines.findIndex((l) => l.startsWith(`IPPolicy/${name}: Creation complete`));
      expect(done).toBeGreaterThan(-1);
      expect(lines.slice(done + 1).some((l) => l.startsWith(`IPPolicy/${name}: Still`))).toBe(false);
    }
  });
});
