// Mistakes that used to go silent or vague: an agent's bare-port --forwards-to, a malformed
// database URL, a weighted backend containing itself, README's duplicated CLI rows, a busy
// ingress port reported as the API's.
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, forwardsTarget, resolveAgentConfig } from '../../agent/config.js';
import { providerOf } from '../../server/store/db.js';
import { removeTempDirs } from '../helpers/temp.js';

afterAll(removeTempDirs);

describe('edgeform agent --forwards-to', () => {
  const flags = (forwardsTo: string) => resolveAgentConfig({ authtoken: 'tok', apiUrl: 'http://127.0.0.1:1', label: ['app=web'], forwardsTo } as never, {}, {});

  it('a bare port is localhost\'s, as for an ephemeral tunnel (it was dialled as 0.0.11.184:80)', () => {
    expect(flags('3000').tunnels[0].forwards_to).toBe('localhost:3000');
    expect(forwardsTarget('8080', 'x')).toBe('localhost:8080');
  });

  it('host:port and URLs are kept as written', () => {
    for (const v of ['localhost:3000', '127.0.0.1:3000', '[::1]:3000', 'app.internal:8080', 'http://localhost:3000', 'https://api.example.com']) expect(forwardsTarget(v, 'x')).toBe(v);
  });

  it('a host the resolver would read as another address is refused, naming the forms', () => {
    for (const v of ['3000:80', '127.1:80', '0x7f000001:80']) {
      expect(() => flags(v)).toThrow(ConfigError);
      expect(() => flags(v)).toThrow(/--forwards-to: .*write host:port \(e\.g\. localhost:3000\) or a bare port/);
    }
  });
});

describe('the database URL', () => {
  it('postgres:/ with one slash, or another scheme, is refused naming the forms accepted, the password hidden', () => {
    for (const url of ['postgres:/u:secret@localhost/db', 'postgresql:u@localhost/db', 'mysql://u@localhost/db', 'sqlite:data/x.db']) {
      expect(() => providerOf(url)).toThrow(/use file:<path> \(or a plain path\) for SQLite, or postgresql:\/\/user@host:port\/db/);
    }
    expect(() => providerOf('postgres:/u:secret@localhost/db')).not.toThrow(/secret/);
  });

  it('file:, a plain path and postgres(ql):// are accepted', () => {
    expect(providerOf('file:data/x.db')).toBe('sqlite');
    expect(providerOf('data/x.db')).toBe('sqlite');
    expect(providerOf('/var/lib/edgeform/x.db')).toBe('sqlite');
    expect(providerOf('postgresql://u@localhost:5432/db')).toBe('postgresql');
    expect(providerOf('postgres://u@localhost/db')).toBe('postgresql');
  });
});

describe('validate: weighted backends that contain themselves', () => {
  it('a backend listing itself, and two listing each other, are each one problem with the loop\'s path (apply used to stop half-way)', async () => {
    const { loadDesired } = await import('../../reconciler/session.js');
    const { ManifestError } = await import('../../reconciler/manifest/problems.js');
    const { manifestDir } = await import('../helpers/cli.js');
    const dir = manifestDir({
      'm.yaml': 'kind: HTTPResponseBackend\nname: ok\nbody: hi\nstatus_code: 200\n---\nkind: WeightedBackend\nname: self\nbackends:\n  WeightedBackend/self: 1\n  HTTPResponseBackend/ok: 1\n---\nkind: WeightedBackend\nname: a\nbackends:\n  WeightedBackend/b: 1\n---\nkind: WeightedBackend\nname: b\nbackends:\n  WeightedBackend/a: 1\n',
    });
    let error: unknown;
    try { loadDesired([dir]); } catch (e) { error = e; }
    expect(error).toBeInstanceOf(ManifestError);
    const messages = (error as InstanceType<typeof ManifestError>).problems.list.map((p) => `${p.line}: ${p.message}`);
    expect(messages).toEqual([
      expect.stringMatching(/^6: reference cycle: WeightedBackend\/self -> WeightedBackend\/self; WeightedBackend\/self refers to itself/),
      expect.stringMatching(/^12: reference cycle: WeightedBackend\/a -> WeightedBackend\/b -> WeightedBackend\/a; these refer to each other in a loop/),
    ]);
  });

  it('a chain without a loop passes', async () => {
    const { loadDesired } = await import('../../reconciler/session.js');
    const { manifestDir } = await import('../helpers/cli.js');
    const dir = manifestDir({ 'm.yaml': 'kind: HTTPResponseBackend\nname: ok\nbody: hi\nstatus_code: 200\n---\nkind: WeightedBackend\nname: a\nbackends:\n  WeightedBackend/b: 1\n---\nkind: WeightedBackend\nname: b\nbackends:\n  HTTPResponseBackend/ok: 1\n' });
    expect(loadDesired([dir]).documents).toHaveLength(3);
  });
});

describe("README's CLI reference", () => {
  it('lists each command form once (validate, plan and apply were there twice, disagreeing about saved plans and secrets)', async () => {
    const fs = await import('node:fs');
    const readme = fs.readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('## CLI reference'), readme.indexOf('\n## ', readme.indexOf('## CLI reference') + 5));
    const forms = [...section.matchAll(/^\| `edgeform ([a-z-]+(?: [a-z-]+)?(?: FILE)?)[ `]/gm)].map((m) => m[1]);
    expect(forms.length).toBeGreaterThan(8);
    expect(forms.filter((f, i) => forms.indexOf(f) !== i)).toEqual([]);
    expect(section).not.toContain('it holds the values to send');
  });
});

describe('edgeform serve: a busy ingress port', () => {
  it('is reported as the --ingress value that asked for it, not as the API\'s address and --port', async () => {
    const net = await import('node:net');
    const { runCliProcess } = await import('../helpers/cli-process.js');
    const { tempDir } = await import('../helpers/temp.js');
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = (busy.address() as import('node:net').AddressInfo).port;
    try {
      const r = await runCliProcess(['serve', '--port', '0', '--data-dir', tempDir(), '--ingress', `443=127.0.0.1:${port}`], {}, { timeoutMs: 60_000 });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`cannot listen on 127.0.0.1:${port} for the ingress (--ingress / EDGEFORM_INGRESS 443=127.0.0.1:${port}): the port is already in use`);
      expect(r.stderr).not.toContain('--port / EDGEFORM_PORT');
    } finally {
      busy.close();
    }
  });
});

describe('edgeform agent, as a user meets it', () => {
  it('with a wrong --api-url says what it tries and what fails, naming the setting; --json logs JSON lines', async () => {
    const { startCli } = await import('../helpers/cli-process.js');
    const { freePort } = await import('../helpers/ports.js');
    const url = `http://127.0.0.1:${await freePort()}`;
    const p = startCli(['agent', '--api-url', url, '--authtoken', 'tok', '--label', 'app=web', '--forwards-to', '3000', '--json']);
    try {
      await p.waitFor('check --api-url / EDGEFORM_API_URL', 30_000, 'stderr');
      const lines = p.stderr.trim().split('\n').map((l) => JSON.parse(l) as { level: string; msg: string });
      expect(lines[0].level).toBe('error');
      expect(lines[0].msg).toContain(`no edgeform server has answered at ${url} (ECONNREFUSED)`);
      await p.waitFor('cannot connect', 30_000, 'stdout');
      expect(JSON.parse(p.stdout.split('\n')[0])).toMatchObject({ level: 'info', msg: expect.stringContaining(`connecting to ${url}`) });
    } finally {
      p.kill('SIGTERM');
      await p.exited;
    }
  });

  it('-v prints the version', async () => {
    const { runCliProcess } = await import('../helpers/cli-process.js');
    const fs = await import('node:fs');
    const r = await runCliProcess(['agent', '-v']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
  });

  it('TERM=dumb turns colour off, as NO_COLOR does', async () => {
    const { styleFor } = await import('../../reconciler/render/text.js');
    const tty = { isTTY: true } as NodeJS.WriteStream;
    const saved = { TERM: process.env.TERM, NO_COLOR: process.env.NO_COLOR, FORCE_COLOR: process.env.FORCE_COLOR };
    try {
      delete process.env.NO_COLOR;
      delete process.env.FORCE_COLOR;
      process.env.TERM = 'xterm-256color';
      expect(styleFor(tty).red('x')).not.toBe('x');
      process.env.TERM = 'dumb';
      expect(styleFor(tty).red('x')).toBe('x');
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
  });
});
