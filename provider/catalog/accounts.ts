// Users, bot users, API keys, tunnel credentials and SSH credentials.
import { z } from 'zod';
import { defineKind } from './define.js';
import { boundedList, description, ITEM_LIMITS, metadata, refId, replaceable } from './fields.js';
import { withTraits } from './traits.js';

const OWNER_KINDS = ['User', 'BotUser'] as const;

/** Bind rules of a tunnel or SSH credential (docs/agents.md, "Binding and the acl"). */
const acl = () => boundedList(z.string().min(1).max(255), ITEM_LIMITS.strings).default([]).describe('Bind rules, e.g. bind:*.example.com.');

const token = () =>
  withTraits(z.string().nullable().describe('Bearer token; returned once, in the creation response, and null afterwards.'), { once: true, computed: true });

export const user = defineKind({
  kind: 'User',
  type: 'user',
  prefix: 'usr',
  path: '/users',
  operations: ['read'],
  summary: 'A person with access to the account (read-only; the first one is created on first start).',
  computed: {
    name: z.string(),
    admin: z.boolean(),
  },
});

export const botUser = defineKind({
  kind: 'BotUser',
  type: 'bot_user',
  prefix: 'bot',
  path: '/bot_users',
  envelope: 'bot_users',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'A non-human owner of API keys and credentials. Never an admin; an inactive bot cannot authenticate.',
  events: true,
  // `metadata` is an extension (docs/api.md, "Bot user metadata"): SPEC's bot has none, and
  // without it the reconciler could not stamp a bot as its stack's own.
  naturalKey: 'name',
  body: {
    name: z.string().min(1).max(255).describe('Name of the bot, at most 255 characters.'),
    active: z.boolean().default(true).describe('Whether the bot may authenticate.'),
    metadata: metadata(),
  },
});

export const apiKey = defineKind({
  kind: 'APIKey',
  type: 'api_key',
  prefix: 'ak',
  path: '/api_keys',
  envelope: 'keys',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'A bearer token for the API, owned by a user or a bot.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    owner_id: withTraits(refId(OWNER_KINDS, { onDelete: 'cascade', replace: true }).optional(), { serverDefault: true })
      .describe('User or bot that owns the key; defaults to the caller; only admins may name another owner.'),
  },
  computed: { token: token() },
});

export const credential = defineKind({
  kind: 'Credential',
  type: 'credential',
  prefix: 'cr',
  path: '/credentials',
  envelope: 'credentials',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'A tunnel credential: the token an agent presents to connect.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    acl: acl(),
    owner_id: withTraits(refId(OWNER_KINDS, { onDelete: 'cascade', replace: true }).optional(), { serverDefault: true })
      .describe('User or bot that owns the credential; defaults to the caller.'),
  },
  computed: { token: token() },
});

/** The unique-key scope of SSH credentials' public keys: the ssh listener finds a key's credential by it. */
export const SSH_KEY_SCOPE = 'ssh_public_key';

/** An authorized-keys line as compared for uniqueness: its algorithm and blob, without the comment. */
export const sshKeyIdentity = (text: string) => text.trim().split(/\s+/).slice(0, 2).join(' ');

export const sshCredential = defineKind({
  kind: 'SSHCredential',
  type: 'ssh_credential',
  prefix: 'sshcr',
  path: '/ssh_credentials',
  envelope: 'ssh_credentials',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'An SSH public key for tunnel sessions over ssh, with bind rules like a tunnel credential; a key is one credential at a time.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    acl: acl(),
    // Trimmed: `${file:id.pub}` ends in a newline that is no part of the key (else a replacement).
    public_key: withTraits(
      replaceable(z.string().trim().min(1).max(16384).describe('The public key, authorized-keys form (ssh-rsa of at least 2048 bits, ecdsa-sha2-nistp256/384/521 or ssh-ed25519), a comment allowed.')),
      { unique: { scope: SSH_KEY_SCOPE, what: 'public key', key: sshKeyIdentity } },
    ),
    owner_id: withTraits(refId(OWNER_KINDS, { onDelete: 'cascade', replace: true }).optional(), { serverDefault: true })
      .describe('User or bot that owns the credential; defaults to the caller.'),
  },
});
