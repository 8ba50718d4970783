import { readFileSync } from 'node:fs';
import process from 'node:process';
import { parseArgs } from 'node:util';
import { createContext, createLogger, type Services, startServices } from '../app.js';
import { pinClientVersion } from '../auth/clients/pins.js';
import { loadPreregisteredClients } from '../auth/clients/preregistered.js';
import { ClientRegistry } from '../auth/clients/registry.js';
import { type Config, ConfigError, loadConfig, SURFACES, type Surface, urlOf } from '../config/config.js';
import type { AppContext } from '../context.js';
import { toRfc3339 } from '../base/clock.js';
import { PACKAGE_IDENTITY } from '../base/package-identity.js';
import { DemoSeedRefused, seedDemo } from '../domain/demo-seed.js';
import { isDependencyOutage } from '../http/dependency-outage.js';
import { endClientConnections, endUserConnections, liveConnectionsByClient } from '../domain/connections.js';
import { createSession, endUserSessions } from '../domain/sessions.js';
import {
  canonicalUsername,
  createUser,
  findUserByUsername,
  setPassword,
  UserInputError,
  type UserRow,
} from '../domain/users.js';
import { BackupRefused, backupEmbeddedDatabase, restoreEmbeddedDatabase } from '../store/backup.js';
import { openStore } from '../store/database.js';
import { migrateToLatest } from '../store/migrate.js';
import { issueSessionToken } from '../tokens/session-token.js';
import { KEY_REFRESH_INTERVAL_MS } from '../tokens/signing-keys.js';

interface Command {
  usage: string;
  summary: string;
  options: Record<string, { type: 'string' | 'boolean'; help: string }>;
  run(values: Record<string, string | boolean | undefined>, config: Config): Promise<void>;
}

class UsageError extends Error {}

const COMMANDS: Record<string, Command> = {
  start: {
    usage: 'svc start [--only api,mcp,agency-mcp,auth]',
    summary: 'Migrate, then serve the surfaces until SIGTERM, SIGINT or SIGHUP.',
    options: { only: { type: 'string', help: 'comma-separated surfaces to serve (default: all)' } },
    run: (v, config) => start(config, parseSurfaces(v['only'])),
  },
  migrate: {
    usage: 'svc migrate',
    summary: 'Apply pending database migrations.',
    options: {},
    async run(_v, config) {
      const store = openStore(config);
      try {
        const results = await migrateToLatest(store.db);
        console.log(
          results.length ? results.map((r) => `applied ${r.migrationName}`).join('\n') : 'up to date',
        );
      } finally {
        await store.close();
      }
    },
  },
  backup: {
    usage: 'svc backup --to FILE',
    summary:
      'Copy the embedded database to a new file (mode 0600) while instances serve and write; for PostgreSQL use pg_dump.',
    options: {
      to: { type: 'string', help: 'the new file to write (never replaced; its folder must exist)' },
    },
    run: (v, config) => backup(config, required(v, 'to')),
  },
  restore: {
    usage: 'svc restore --from FILE',
    summary:
      'Put a backup in place of the embedded database, once no process has it open; the one it replaces is kept beside it.',
    options: { from: { type: 'string', help: 'the backup to restore (made by svc backup)' } },
    run: (v, config) => restore(config, required(v, 'from')),
  },
  'seed-demo': {
    usage: 'svc seed-demo',
    summary: 'Create the demo accounts (refused in production).',
    options: {},
    run: (_v, config) =>
      withContext(config, async (ctx) => {
        const created = await seedDemo(ctx.db, ctx.clock, config.production);
        console.log(created.length ? `created ${created.join(', ')}` : 'demo already seeded');
      }),
  },
  'users create': {
    usage:
      'svc users create --username NAME (--password-stdin | --password PW) [--image-url URL] [--api-version V]',
    summary: 'Create a user. Prefer --password-stdin: arguments are visible to other local users.',
    options: {
      username: { type: 'string', help: 'the public handle' },
      password: { type: 'string', help: 'the password (visible in the process list)' },
      'password-stdin': { type: 'boolean', help: 'read the password from standard input' },
      'image-url': { type: 'string', help: 'avatar URL' },
      'api-version': { type: 'string', help: 'pin the account to this API version' },
    },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        const username = required(v, 'username');
        const password = passwordOption(v);
        const apiVersion = typeof v['api-version'] === 'string' ? pinValue(ctx, v['api-version']) : null;
        const user = await createUser(ctx.db, ctx.clock, {
          username,
          password,
          imageUrl: (v['image-url'] as string | undefined) ?? null,
          apiVersion,
        });
        console.log(
          JSON.stringify({ object: 'user', id: user.id, username: user.username, image_url: user.image_url }),
        );
      }),
  },
  'users sign-out': {
    usage: 'svc users sign-out --username NAME',
    summary:
      'End every session and connection of a user (an account that may be compromised: set its password too).',
    options: { username: { type: 'string', help: 'the user' } },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        const user = await userNamed(ctx, required(v, 'username'));
        console.log(`${user.username}: ${await signOutEverywhere(ctx, user)}`);
      }),
  },
  'users set-password': {
    usage: 'svc users set-password --username NAME (--password-stdin | --password PW)',
    summary: "Set a user's password, and end every session and connection they had.",
    options: {
      username: { type: 'string', help: 'the user' },
      password: { type: 'string', help: 'the new password (visible in the process list)' },
      'password-stdin': { type: 'boolean', help: 'read the new password from standard input' },
    },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        const user = await userNamed(ctx, required(v, 'username'));
        await setPassword(ctx.db, user.id, passwordOption(v));
        console.log(`${user.username}: password set; ${await signOutEverywhere(ctx, user)}`);
      }),
  },
  'users pin': {
    usage: 'svc users pin --username NAME --api-version (VERSION | none)',
    summary:
      "Set a user's pinned API version (used when a request sends no Svc-Version); none = the baseline.",
    options: {
      username: { type: 'string', help: 'the user' },
      'api-version': { type: 'string', help: 'a supported version, or none' },
    },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        // As the sign-in page reads a name: "Marie" and "marie " are marie.
        const username = canonicalUsername(required(v, 'username'));
        const version = pinValue(ctx, required(v, 'api-version'));
        const { numUpdatedRows } = await ctx.db
          .updateTable('users')
          .set({ api_version: version })
          .where('username', '=', username)
          .executeTakeFirst();
        if (numUpdatedRows === 0n) throw new UsageError(`no user named ${username}`);
        console.log(`${username} pinned to ${version ?? `the baseline (${ctx.versions.baseline})`}`);
      }),
  },
  'clients pin': {
    usage: 'svc clients pin --client-id ID --api-version (VERSION | none)',
    summary: "Set an OAuth client's pinned API version; it comes before the user's pin.",
    options: {
      'client-id': { type: 'string', help: 'the OAuth client' },
      'api-version': { type: 'string', help: 'a supported version, or none' },
    },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        const clientId = required(v, 'client-id');
        const version = pinValue(ctx, required(v, 'api-version'));
        const preregistered = loadPreregisteredClients(config.oauth.preregisteredClientsFile);
        const known = new Set(preregistered.keys());
        if (!(await pinClientVersion(ctx.db, ctx.clock, known, clientId, version)))
          throw new UsageError(`no OAuth client ${clientId}`);
        console.log(`${clientId} pinned to ${version ?? 'no version (the user pin, then the baseline)'}`);
      }),
  },
  'clients disconnect': {
    usage: 'svc clients disconnect --client-id ID',
    summary:
      'End every connection an OAuth client holds, for every member (its tokens may have been stolen from it).',
    options: { 'client-id': { type: 'string', help: 'the OAuth client' } },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        const clientId = required(v, 'client-id');
        if (!(await isKnownClient(ctx, clientId))) throw new UsageError(`no OAuth client ${clientId}`);
        const ended = await endClientConnections(ctx.db, ctx.clock, clientId);
        console.log(
          `${clientId}: ${ended.length} connection${ended.length === 1 ? '' : 's'} ended; every instance refuses ` +
            `their tokens within ${ctx.config.livenessCacheSeconds} s. The application may still ask members to ` +
            `connect it again.`,
        );
      }),
  },
  'clients list': {
    usage: 'svc clients list [--all]',
    summary:
      'List the OAuth clients that hold live connections, the most connected first, one JSON object a line ' +
      '(--all: every known client, those without a connection too).',
    options: { all: { type: 'boolean', help: 'also the clients that hold no live connection' } },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        const holdings = new Map(
          (await liveConnectionsByClient(ctx.db, ctx.clock.now())).map((h) => [h.clientId, h]),
        );
        const registry = new ClientRegistry(ctx);
        const ids = new Set(holdings.keys());
        if (v['all'] === true) {
          for (const id of registry.preregistered.keys()) ids.add(id);
          const stored = await ctx.db.selectFrom('oauth_clients').select('client_id').execute();
          for (const { client_id } of stored) ids.add(client_id);
        }
        const described = await registry.describeAll(ids);
        const held = (id: string) => holdings.get(id)?.connections ?? 0;
        for (const id of [...ids].sort((a, b) => held(b) - held(a) || (a < b ? -1 : 1))) {
          const client = described.get(id)!;
          const h = holdings.get(id);
          console.log(
            JSON.stringify({
              object: 'client',
              id,
              // A registration pruned while its connections remain has no name left: null, not its id again.
              kind: client.kind ?? null,
              name: client.kind === undefined ? null : client.name,
              host: client.host ?? null,
              live_connections: h?.connections ?? 0,
              users: h?.users ?? 0,
              last_used_at: h?.lastUsedAt == null ? null : toRfc3339(h.lastUsedAt),
            }),
          );
        }
      }),
  },
  'sessions create': {
    usage: 'svc sessions create --username NAME',
    summary: 'Create a session for a user and print it with its token (for scripts and agents).',
    options: { username: { type: 'string', help: 'the user to sign in' } },
    run: (v, config) =>
      withContext(config, async (ctx) => {
        const user = await userNamed(ctx, required(v, 'username'));
        const session = await createSession(ctx.db, ctx.clock, user.id, config.sessionTtlSeconds);
        const token = await issueSessionToken(ctx, session);
        console.log(
          JSON.stringify({
            object: 'session',
            id: session.id,
            token,
            expires_at: toRfc3339(session.expires_at),
          }),
        );
      }),
  },
  'keys rotate': {
    usage: 'svc keys rotate',
    summary: 'Start signing with a new key; the old one stays published until the tokens it signed expire.',
    options: {},
    run: (_v, config) =>
      withContext(config, async (ctx) => {
        console.log(`signing with new key ${await ctx.keys.rotate()}`);
      }),
  },
  'keys withdraw': {
    usage: 'svc keys withdraw',
    summary:
      'Sign with a new key at once and stop accepting every other (a key that may have leaked): every token they signed is refused.',
    options: {},
    run: (_v, config) =>
      withContext(config, async (ctx) => {
        const { kid, withdrawn } = await ctx.keys.withdraw();
        console.log(
          `signing with new key ${kid}; withdrawn: ${withdrawn.join(', ') || 'none'}. Every instance refuses the ` +
            `tokens they signed within ${KEY_REFRESH_INTERVAL_MS / 1000} s: members sign in again, apps refresh.`,
        );
      }),
  },
};

/**
 * `svc backup`: the embedded database copied as one snapshot (store/backup.ts), never migrated, and one JSON line
 * saying what was written. PostgreSQL has its own tools, which know its replication and permissions.
 */
async function backup(config: Config, target: string): Promise<void> {
  embeddedOnly(config, 'svc backup copies', 'back it up with pg_dump or continuous archiving');
  const started = Date.now();
  const made = backupEmbeddedDatabase(config.dataDir, target, config.databaseConnectTimeoutMs);
  console.log(
    JSON.stringify({
      object: 'backup',
      ...made,
      taken_at: toRfc3339(started),
      seconds: Number(((Date.now() - started) / 1000).toFixed(3)),
    }),
  );
}

/** A command of the embedded database's file, refused when DATABASE_URL names PostgreSQL, whose own tools it names. */
function embeddedOnly(config: Config, does: string, instead: string): void {
  if (config.databaseUrl)
    throw new UsageError(
      `${does} the embedded database; DATABASE_URL names PostgreSQL: ${instead} (docs/deployment.md#backups)`,
    );
}

/** `svc restore`: a checked backup in place of the embedded database (store/backup.ts), and one JSON line. */
async function restore(config: Config, from: string): Promise<void> {
  embeddedOnly(config, 'svc restore replaces', 'restore it with pg_restore or psql');
  console.log(
    JSON.stringify({ object: 'restore', ...restoreEmbeddedDatabase(config.dataDir, from, new Date()) }),
  );
}

/** The password of `--password-stdin` (its one line, without the newline) or of `--password`. */
function passwordOption(v: Record<string, unknown>): string {
  if (!v['password-stdin'] && v['password'] === undefined)
    throw new UsageError('--password-stdin (or --password PW) is required');
  return v['password-stdin'] ? readFileSync(0, 'utf8').replace(/\r?\n$/, '') : required(v, 'password');
}

/** The user of `--username`, read as the sign-in page reads a name ("Marie" and "marie " are marie). */
async function userNamed(ctx: AppContext, typed: string): Promise<UserRow> {
  const username = canonicalUsername(typed);
  const user = await findUserByUsername(ctx.db, username);
  if (!user) throw new UsageError(`no user named ${username}`);
  return user;
}

/**
 * Ends every session (API and browser) and every connection of a user, and says what it ended. The instances serving
 * refuse their tokens within LIVENESS_CACHE_SECONDS: this process is not one of them, and tells none of them.
 */
async function signOutEverywhere(ctx: AppContext, user: UserRow): Promise<string> {
  const sessions = await endUserSessions(ctx.db, ctx.clock, user.id);
  const connections = await endUserConnections(ctx.db, ctx.clock, user.id);
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  return (
    `${count(sessions, 'session')} and ${count(connections.length, 'connection')} ended; every instance refuses ` +
    `their tokens within ${ctx.config.livenessCacheSeconds} s`
  );
}

/**
 * Whether `clientId` names an OAuth client: pre-registered, stored (registered or a metadata document), or one whose
 * registration was pruned while connections of it remain.
 */
async function isKnownClient(ctx: AppContext, clientId: string): Promise<boolean> {
  if (loadPreregisteredClients(ctx.config.oauth.preregisteredClientsFile).has(clientId)) return true;
  const stored = ctx.db.selectFrom('oauth_clients').select('client_id').where('client_id', '=', clientId);
  const connected = ctx.db.selectFrom('connections').select('id').where('client_id', '=', clientId);
  return (
    (await stored.executeTakeFirst()) !== undefined || (await connected.executeTakeFirst()) !== undefined
  );
}

/** A pin value: a supported version, or `none` to clear the pin (docs/contract.md#versioning). */
function pinValue(ctx: AppContext, value: string): string | null {
  if (value === 'none') return null;
  if (!ctx.versions.has(value))
    throw new UsageError(`--api-version must be none or one of ${ctx.versions.ids.join(', ')}`);
  return value;
}

function required(v: Record<string, unknown>, name: string): string {
  const value = v[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function parseSurfaces(value: unknown): Surface[] | undefined {
  if (value === undefined) return undefined;
  const names = String(value)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !SURFACES.includes(n as Surface));
  if (unknown.length || names.length === 0) {
    throw new UsageError(`--only takes a comma-separated list of ${SURFACES.join(', ')}`);
  }
  // Named twice, served once: the second listen met the first on its own port (EADDRINUSE).
  return [...new Set(names)] as Surface[];
}

/** Runs a one-off command with the same context as the server (migrated store, keys), then closes it. */
async function withContext(config: Config, fn: (ctx: AppContext) => Promise<void>): Promise<void> {
  const ctx = await createContext(
    { ...config, logLevel: 'warn' },
    createLogger({ ...config, logLevel: 'warn' }),
    {
      seedDemoIfEmpty: false,
    },
  );
  try {
    await fn(ctx);
  } finally {
    await ctx.close();
  }
}

async function start(config: Config, only: Surface[] | undefined): Promise<void> {
  const services = await startServices(config, only ? { only } : {});
  // Before the URLs are printed: whoever started the service may stop it the moment it reads them (a supervisor, a
  // test), and a SIGTERM that finds no handler ends the process at once, with nothing drained or closed.
  stopOnSignals(config, services);
  // The banner below and Node's own warnings are written through process.stdout and stderr (the log has a destination
  // of its own, which reports its own failure): one whose reader is gone (EPIPE) or on a full disk (ENOSPC) emits an
  // error that, with no listener, ended the process that serves. What they would have printed is lost, nothing else.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  // For the person at the terminal, on stderr: a served process's stdout is its log, JSON lines only, which a
  // collector or `| jq` parses line by line (the `listening` lines say the same for machines).
  const lines = Object.keys(services.servers).map((s) => `  ${s.padEnd(11)} ${urlOf(config, s as Surface)}`);
  console.error(`svc is up (${services.ctx.store.engine} database):\n${lines.join('\n')}`);
  if (!config.production && services.servers.auth) {
    console.error(`  demo users: ada, grace, linus (password: <name>-demo-password)`);
  }
}

/**
 * On SIGTERM, SIGINT or SIGHUP: stop accepting, finish the requests in flight, close, exit 0 (1 when that takes longer
 * than SHUTDOWN_TIMEOUT_SECONDS or fails).
 *
 * SIGHUP too: it comes when the terminal that started the process closes, or from a supervisor's "reload", and its
 * default action ended the process at once, dropping the requests in flight. The settings are read once at start, so
 * there is nothing to reload; ending gracefully is what its default did, without the loss. (Exit 0 and death by
 * SIGHUP are both a clean stop to systemd's Restart=on-failure: no unit stays down that did not before.)
 */
function stopOnSignals(config: Config, services: Services): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    services.ctx.log.info({ signal }, 'shutting down: finishing in-flight requests');
    const timer = setTimeout(() => {
      services.ctx.log.error('shutdown timed out; exiting');
      process.exit(1);
    }, config.shutdownTimeoutSeconds * 1000);
    timer.unref();
    services.close().then(
      () => {
        services.ctx.log.info('stopped');
        process.exit(0);
      },
      (e: unknown) => {
        services.ctx.log.error({ err: e }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => stop('SIGHUP'));
}

function help(name?: string): string {
  if (name && COMMANDS[name]) {
    const c = COMMANDS[name]!;
    const opts = Object.entries(c.options).map(([k, o]) => `  --${k.padEnd(16)} ${o.help}`);
    return [
      `Usage: ${c.usage}`,
      '',
      c.summary,
      '',
      'Options:',
      ...opts,
      `  --${'help'.padEnd(16)} show this help`,
    ].join('\n');
  }
  // The summaries in one column, past the longest name (`clients disconnect` ran into its summary at 16).
  const width = Math.max(...Object.keys(COMMANDS).map((k) => k.length));
  const list = Object.entries(COMMANDS).map(([k, c]) => `  ${k.padEnd(width)}  ${c.summary}`);
  return [
    'Usage: svc <command> [options]',
    '',
    'Commands:',
    ...list,
    '',
    'Settings come from the environment; see the README.',
    "Run 'svc <command> --help' for a command's options, 'svc --version' for this build's.",
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const two = argv.slice(0, 2).join(' ');
  const name = COMMANDS[two] ? two : argv[0];
  const rest = argv.slice(COMMANDS[two] ? 2 : 1);
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return 0;
  }
  // Which build is this: the question of whoever is on call, or rolling a deploy back.
  if (name === '--version' || name === 'version') {
    console.log(`svc ${PACKAGE_IDENTITY.version} (${PACKAGE_IDENTITY.name}, node ${process.version})`);
    return 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    console.error(`svc: unknown command "${argv.join(' ')}"\n\n${help()}`);
    return 2;
  }
  let config: Config | undefined;
  try {
    const { values } = parseArgs({
      args: rest,
      options: { ...command.options, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    });
    if (values.help) {
      console.log(help(name));
      return 0;
    }
    config = loadConfig();
    await command.run(values, config);
    return 0;
  } catch (e) {
    if (
      e instanceof ConfigError ||
      e instanceof UsageError ||
      e instanceof UserInputError ||
      e instanceof DemoSeedRefused ||
      e instanceof BackupRefused
    ) {
      console.error(`svc: ${e.message}`);
      return 2;
    }
    if (e instanceof TypeError && 'code' in e && String(e.code).startsWith('ERR_PARSE_ARGS')) {
      console.error(`svc: ${e.message}\n\n${help(name)}`);
      return 2;
    }
    console.error(`svc: ${failure(e, config)}`);
    return 1;
  }
}

/**
 * What stopped a command, in one line an operator can act on: the message, with the error's code when the message
 * lacks it, and where the database is. SQLite's own messages name neither code nor file: a full disk stops `svc
 * start` with "disk I/O error" (`SQLITE_IOERR_SHMSIZE`) over an existing database. node-postgres's name no
 * dependency: "connect ECONNREFUSED 127.0.0.1:5433", or "Connection terminated due to connection timeout" alone.
 */
function failure(e: unknown, config: Config | undefined): string {
  if (!(e instanceof Error)) return String(e);
  const code = (e as { code?: unknown }).code;
  const postgres =
    config?.databaseUrl && isPostgresFailure(e) ? `PostgreSQL (${where(config.databaseUrl)}): ` : '';
  if (typeof code !== 'string' || code === '' || e.message.includes(code)) return postgres + e.message;
  const embedded = code.startsWith('SQLITE_') && config !== undefined && !config.databaseUrl;
  return `${postgres}${e.message} (${code}${embedded ? `: the embedded database in ${config.dataDir}` : ''})`;
}

/** An error of reaching PostgreSQL (a network error, a lost or slow connection) or one it answered (a SQLSTATE). */
const isPostgresFailure = (e: Error): boolean =>
  isDependencyOutage(e) || /^[0-9A-Z]{5}$/.test(String((e as { code?: unknown }).code));

/** `host:port/database` of a PostgreSQL URL, never its user or password (a socket directory is its host). */
function where(databaseUrl: string): string {
  if (!URL.canParse(databaseUrl)) return 'DATABASE_URL';
  const u = new URL(databaseUrl);
  const host = u.hostname || u.searchParams.get('host') || 'localhost';
  return `${host}:${u.port || '5432'}/${decodeURIComponent(u.pathname.slice(1))}`;
}
