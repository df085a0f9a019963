// An API key or credential declared in a manifest is only of use with its token, which the
// server returns once, in the creation response. `token_file` keeps it: apply writes it
// there (mode 0600) when it creates the resource, and never prints it.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { NO_CHANGES, stackRunner, toYaml } from '../helpers/reconciler.js';

describe('reconciler: token_file', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s.close();
  });

  it('writes the token of a created API key and credential, readable by the owner alone, and prints it nowhere', async () => {
    const dir = manifestDir({
      'ci.yaml': toYaml([
        { kind: 'BotUser', name: 'ci' },
        { kind: 'APIKey', name: 'ci-key', description: 'ci', owner_id: 'BotUser/ci', token_file: 'secrets/ci.token' },
        { kind: 'Credential', name: 'agent', acl: ['bind:agent.example.com'], token_file: '../agent.token' },
      ]),
    });
    const me = stackRunner(s, { EDGEFORM_STACK: 'tokens' });
    const keyFile = path.join(dir, 'secrets', 'ci.token');
    const credFile = path.join(dir, '..', 'agent.token');
    const plan = await me.run(['plan', '-f', dir]);
    expect(plan.stdout).toContain(`(the token, returned once, will be written to ${keyFile})`);
    expect((await me.planJson(['-f', dir])).resource_changes.find((c: any) => c.address === 'APIKey/ci-key').token_file).toBe(keyFile);

    const applied = await me.run(['apply', '-f', dir, '--auto-approve']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(applied.stdout).toMatch(new RegExp(`APIKey/ci-key: Creation complete after \\d+s \\[id=ak_\\w+\\]; token written to ${keyFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    const token = fs.readFileSync(keyFile, 'utf8').trim();
    expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(credFile, 'utf8').trim()).toMatch(/\S{20,}/);
    // It is the key's token: it authenticates, as the bot.
    const asBot = await s.get('/ip_policies', { token });
    expect(asBot.status).toBe(200);
    expect(asBot.headers.get('service-api-key-id')).toMatch(/^ak_/);
    for (const out of me.outputs) {
      expect(out).not.toContain(token);
      expect(out).not.toContain(fs.readFileSync(credFile, 'utf8').trim());
    }

    // Not part of the resource: nothing to change, and the file is left alone.
    expect((await me.run(['plan', '-f', dir])).stdout).toContain(NO_CHANGES);
    fs.rmSync(credFile);
  });

  it('is refused on a kind that returns no token, and must be a path', async () => {
    const dir = manifestDir({
      'bad.yaml': toYaml([
        { kind: 'IPPolicy', name: 'office', token_file: 'office.token' },
        { kind: 'APIKey', name: 'k', token_file: '' },
      ]),
    });
    const r = await stackRunner(s).run(['validate', '-f', dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/bad\.yaml:\d+: token_file applies to kinds whose creation returns a token \(APIKey, Credential\), not IPPolicy/);
    expect(r.stderr).toMatch(/bad\.yaml:\d+: token_file must be a file path, relative to the manifest file/);
  });

  it('a token that cannot be written: the key is deleted again and the failure says why; fixed, the next apply creates it', async () => {
    const dir = manifestDir({ 'k.yaml': '' });
    // A file where the folder should be: the token cannot be written under it.
    fs.writeFileSync(path.join(dir, 'blocker'), '');
    const write = (file: string) => fs.writeFileSync(path.join(dir, 'k.yaml'), toYaml([{ kind: 'APIKey', name: 'lost', description: 'lost', token_file: file }]));
    write('blocker/lost.token');
    const me = stackRunner(s, { EDGEFORM_STACK: 'lost' });
    const failed = await me.run(['apply', '-f', dir, '--auto-approve']);
    expect(failed.code).toBe(1);
    expect(failed.stdout + failed.stderr).toMatch(/APIKey\/lost: .*its token could not be written to .*blocker\/lost\.token \((ENOTDIR|EEXIST)\), and the server returns it only once: ak_\w+ was deleted again; fix token_file and apply again/);
    const keys = (await s.get('/api_keys?limit=100')).body.keys.filter((k: any) => k.description === 'lost');
    expect(keys).toEqual([]);
    write('lost.token');
    const again = await me.run(['apply', '-f', dir, '--auto-approve']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect((await s.get('/ip_policies', { token: fs.readFileSync(path.join(dir, 'lost.token'), 'utf8').trim() })).status).toBe(200);
  });
});
