// `edgeform admin`: operator commands that need shell access to the server's machine and its
// database settings, not an API key: the way back in when no admin key is left or known.
import { Command, Option } from 'commander';
import fs from 'node:fs';
import os from 'node:os';
import { apiKey, user } from '../provider/catalog/accounts.js';
import { resolveConfig } from '../server/config.js';
import '../server/resources/register.js';
import type { Ctx } from '../server/resources/context.js';
import { createResource } from '../server/resources/engine.js';
import { SSH_FINGERPRINT_SETTING } from '../server/gateway/ssh/host-key-fingerprint.js';
import { openDatabase, providerOf, sqliteFile, type Database } from '../server/store/db.js';
import type { SecretBox } from '../server/store/secret-box.js';
import type { Io } from './reconcile.js';

/** API keys hold no sealed value, so this command never needs (or creates) the secret key. */
const noSecrets = {
  seal() { throw new Error('edgeform admin create-key does not write sealed values'); },
  open() { throw new Error('edgeform admin create-key does not read sealed values'); },
} as unknown as SecretBox;

function databaseOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--database <url>', 'file:<path> for SQLite or postgresql://... (default file:<data-dir>/edgeform.db), as for serve').env('EDGEFORM_DATABASE_URL'))
    .addOption(new Option('--data-dir <dir>', 'the server\'s data folder, as for serve').env('EDGEFORM_DATA_DIR').default('data'))
    .addOption(new Option('--public-url <url>', 'base of the key\'s uri, as for serve').env('EDGEFORM_PUBLIC_URL'));
}

async function openExisting(url: string): Promise<Database> {
  if (providerOf(url) === 'sqlite' && !fs.existsSync(sqliteFile(url))) {
    throw new Error(`no database at ${sqliteFile(url)}; pass the --database or --data-dir the server runs with (edgeform serve creates the database on first start)`);
  }
  return openDatabase(url);
}

/** The server settings a subcommand reads the database with, or undefined (said on stderr) when they are a usage error. */
function databaseConfig(opts: { database?: string; dataDir?: string; publicUrl?: string }, out: Pick<Io, 'err'>) {
  try {
    const config = resolveConfig({ database: opts.database, dataDir: opts.dataDir, publicUrl: opts.publicUrl });
    providerOf(config.databaseUrl);
    return config;
  } catch (e) {
    out.err(`Error: ${(e as Error).message}\n`);
    return undefined;
  }
}

export function adminCommand(setCode: (code: number) => void, io: () => Io) {
  const admin = new Command('admin').description('Operator commands run on the server\'s machine, with its database settings instead of an API key.');
  admin.addCommand(
    databaseOptions(new Command('create-key'))
      .description('Create a new API key for the admin user and print its token: the recovery path when no admin key is left or known. Works while the server runs.')
      .option('--description <text>', 'description of the new key')
      .option('--json', 'print {"id", "owner_id", "token", ...} as JSON')
      .addHelpText('after', `
The token is printed once, alone on stdout (TOKEN=$(edgeform admin create-key)); what was done goes to stderr.
Run it with the same --database / --data-dir (or EDGEFORM_DATABASE_URL / EDGEFORM_DATA_DIR) as edgeform serve.`)
      .action(async (opts) => {
        const out = io();
        const config = databaseConfig(opts, out);
        if (!config) return setCode(2);
        let db: Database | undefined;
        try {
          db = await openExisting(config.databaseUrl);
          const admins = await db.prisma.resource.findMany({ where: { kind: user.kind }, orderBy: { id: 'asc' } });
          const adminUser = admins.find((u) => (u.data as { computed: { admin?: boolean } }).computed.admin === true);
          if (!adminUser) throw new Error(`the database at ${db.where} has no admin user yet; start edgeform serve once to create it`);
          const ctx: Ctx = {
            db,
            box: noSecrets,
            publicUrl: config.publicUrl ?? `http://${config.host}:${config.port}`,
            caller: { keyId: '', ownerId: adminUser.id, admin: true },
          };
          const description = opts.description ?? `recovery key made by edgeform admin create-key on ${os.hostname()} at ${new Date().toISOString()}`;
          const created = await createResource(ctx, apiKey, { description, owner_id: adminUser.id });
          if (opts.json) out.out(`${JSON.stringify(created)}\n`);
          else {
            out.err(`Created API key ${created.id} for the admin user ${adminUser.id}. Its token, shown once, follows on stdout; keep it safe.\n`);
            out.out(`${created.token}\n`);
          }
          setCode(0);
        } catch (e) {
          out.err(`Error: ${(e as Error).message}\n`);
          setCode(1);
        } finally {
          await db?.close();
        }
      }),
  );
  admin.addCommand(
    databaseOptions(new Command('ssh-host-key'))
      .description('Print the fingerprint of the server\'s SSH host key (edgeform serve --ssh-listen), to compare with what ssh shows on a first connection.')
      .option('--json', 'print {"fingerprint"} as JSON')
      .action(async (opts) => {
        const out = io();
        const config = databaseConfig(opts, out);
        if (!config) return setCode(2);
        let db: Database | undefined;
        try {
          db = await openExisting(config.databaseUrl);
          const fingerprint = (await db.prisma.setting.findUnique({ where: { key: SSH_FINGERPRINT_SETTING } }))?.value;
          if (!fingerprint) throw new Error(`the database at ${db.where} has no SSH host key yet; it is made when edgeform serve first starts with --ssh-listen`);
          out.out(opts.json ? `${JSON.stringify({ fingerprint })}\n` : `${fingerprint}\n`);
          setCode(0);
        } catch (e) {
          out.err(`Error: ${(e as Error).message}\n`);
          setCode(1);
        } finally {
          await db?.close();
        }
      }),
  );
  return admin;
}
