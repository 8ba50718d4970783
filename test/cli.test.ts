import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { openStore, type Store } from '../src/store/database.js';
import { svc, useDatabaseForCli } from './helpers/cli.js';
import { freshDatabase } from './helpers/harness.js';

let db: Awaited<ReturnType<typeof freshDatabase>>;
const saved = { ...process.env };
beforeAll(async () => {
  db = await freshDatabase();
  useDatabaseForCli(db.env);
});
afterAll(async () => {
  process.env = saved;
  await db.drop();
});
afterEach(() => vi.restoreAllMocks());

/** Runs `fn` against the database the CLI uses. */
async function withStore<T>(fn: (db: Store['db']) => Promise<T>): Promise<T> {
  const store = openStore({
    databaseUrl: process.env['DATABASE_URL'],
    dataDir: process.env['DATA_DIR'] ?? '',
    databasePoolSize: 1,
  });
  try {
    return await fn(store.db);
  } finally {
    await store.close();
  }
}

const COMMANDS = [
  'start',
  'migrate',
  'backup',
  'restore',
  'seed-demo',
  'users create',
  'users sign-out',
  'users set-password',
  'users pin',
  'clients pin',
  'clients disconnect',
  'clients list',
  'sessions create',
  'keys rotate',
  'keys withdraw',
];

describe('svc', () => {
  it('lists its commands', async () => {
    const r = await svc('--help');
    expect(r.code).toBe(0);
    for (const c of COMMANDS) expect(r.out).toContain(c);
    // Each summary in one column, past the longest name (a long name ran into its summary).
    const summaryAt = (command: string) => {
      const line = r.out.split('\n').find((l) => l.startsWith(`  ${command}  `))!;
      return line.length - line.slice(command.length + 2).trimStart().length;
    };
    expect(new Set(COMMANDS.map(summaryAt))).toEqual(new Set([summaryAt('users set-password')]));
  });

  it('says which build it is (--version, or version), with no setting read', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      name: string;
      version: string;
    };
    process.env['API_PORT'] = 'not a port'; // a bad setting does not stand in the way
    try {
      for (const args of [['--version'], ['version']]) {
        expect(await svc(...args)).toEqual({
          code: 0,
          out: `svc ${pkg.version} (${pkg.name}, node ${process.version})`,
          err: '',
        });
      }
    } finally {
      delete process.env['API_PORT'];
    }
  });

  it.each(COMMANDS)('%s --help', async (command) => {
    const r = await svc(...command.split(' '), '--help');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^Usage: svc ${command}`));
  });

  it('refuses an unknown command or option with usage and exit code 2', async () => {
    expect((await svc('frobnicate')).code).toBe(2);
    const r = await svc('migrate', '--force');
    expect(r.code).toBe(2);
    expect(r.err).toContain('Usage: svc migrate');
  });

  it('stops on a bad setting with one line naming the variable', async () => {
    process.env['API_PORT'] = 'eighty';
    try {
      const r = await svc('migrate');
      expect(r.code).toBe(2);
      expect(r.err).toBe('svc: Invalid API_PORT="eighty": expected number, received NaN');
    } finally {
      delete process.env['API_PORT'];
    }
  });

  it("stops on a database it cannot use with one line naming the error's code, and the embedded database's place", async () => {
    const saved = { DATABASE_URL: process.env['DATABASE_URL'], DATA_DIR: process.env['DATA_DIR'] };
    const dir = mkdtempSync(join(tmpdir(), 'svc-cli-'));
    try {
      // Not a database (a wrong DATA_DIR, a file overwritten): SQLite's message alone names neither code nor file.
      writeFileSync(
        join(dir, 'svc.sqlite'),
        'not a database, but long enough to be read as a header. '.repeat(4),
      );
      delete process.env['DATABASE_URL'];
      process.env['DATA_DIR'] = dir;
      const embedded = await svc('migrate');
      expect(embedded).toMatchObject({
        code: 1,
        err: `svc: file is not a database (SQLITE_NOTADB: the embedded database in ${dir})`,
      });
      // A file where DATA_DIR, or a directory on its path, should be: Node's message named neither the setting nor why.
      delete process.env['DATABASE_URL'];
      process.env['DATA_DIR'] = join(dir, 'svc.sqlite');
      expect(await svc('migrate')).toMatchObject({
        code: 1,
        err: `svc: DATA_DIR ${join(dir, 'svc.sqlite')} cannot hold the embedded database: a file is in the way (EEXIST)`,
      });
      process.env['DATA_DIR'] = join(dir, 'svc.sqlite', 'data');
      expect((await svc('migrate')).err).toBe(
        `svc: DATA_DIR ${join(dir, 'svc.sqlite', 'data')} cannot hold the embedded database: a file is in the way (ENOTDIR)`,
      );
      // PostgreSQL's SQLSTATE, for a database that is not there.
      const url = new URL(process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test');
      url.pathname = '/svc_no_such_database';
      process.env['DATABASE_URL'] = url.toString();
      const postgres = await svc('migrate');
      expect(postgres).toMatchObject({
        code: 1,
        err: `svc: PostgreSQL (${url.hostname}:${url.port || '5432'}/svc_no_such_database): database "svc_no_such_database" does not exist (3D000)`,
      });
      // A server that is not there: node-postgres's message named neither PostgreSQL nor, on a timeout, the address.
      process.env['DATABASE_URL'] = 'postgres://svc:secret-password@127.0.0.1:1/svc';
      const refused = await svc('migrate');
      expect(refused.code).toBe(1);
      expect(refused.err).toMatch(
        /^svc: PostgreSQL \(127\.0\.0\.1:1\/svc\): connect ECONNREFUSED 127\.0\.0\.1:1/,
      );
      expect(refused.err).not.toContain('secret-password');
    } finally {
      Object.assign(process.env, saved);
      if (saved.DATABASE_URL === undefined) delete process.env['DATABASE_URL'];
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stops on a port it cannot listen on with one line naming what could not listen, where, and the setting', async () => {
    // With PostgreSQL's DATABASE_URL set, a HOST that is no address here (EADDRNOTAVAIL, a network code) was reported
    // as PostgreSQL's failure; and Node's own message named neither the surface nor the setting.
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    const postgres = await freshDatabase('postgres');
    try {
      Object.assign(process.env, postgres.env, { API_PORT: String(port) });
      expect(await svc('start', '--only', 'api')).toMatchObject({
        code: 1,
        err: `svc: the api surface cannot listen on 127.0.0.1:${port} (HOST, API_PORT): another process listens there (EADDRINUSE)`,
      });
      Object.assign(process.env, { API_PORT: '0', AGENCY_MCP_PORT: String(port) });
      expect((await svc('start', '--only', 'api,agency-mcp')).err).toBe(
        `svc: the agency-mcp surface cannot listen on 127.0.0.1:${port} (HOST, AGENCY_MCP_PORT): another process listens there (EADDRINUSE)`,
      );
      Object.assign(process.env, { AGENCY_MCP_PORT: '0', METRICS_PORT: String(port) });
      expect((await svc('start', '--only', 'api')).err).toBe(
        `svc: the metrics listener cannot listen on 127.0.0.1:${port} (HOST, METRICS_PORT): another process listens there (EADDRINUSE)`,
      );
      Object.assign(process.env, { HOST: '192.0.2.1' });
      delete process.env['METRICS_PORT'];
      expect(await svc('start', '--only', 'api')).toMatchObject({
        code: 1,
        err: 'svc: the api surface cannot listen on 192.0.2.1 (HOST, API_PORT): that is not an address of this machine (EADDRNOTAVAIL)',
      });
      // The metrics listener's own address (METRICS_HOST) is named as its setting.
      Object.assign(process.env, { HOST: '127.0.0.1', METRICS_PORT: '0', METRICS_HOST: '192.0.2.1' });
      expect((await svc('start', '--only', 'api')).err).toBe(
        'svc: the metrics listener cannot listen on 192.0.2.1 (METRICS_HOST, METRICS_PORT): that is not an address of this machine (EADDRNOTAVAIL)',
      );
    } finally {
      for (const name of [
        'API_PORT',
        'AGENCY_MCP_PORT',
        'METRICS_PORT',
        'METRICS_HOST',
        'HOST',
        'DATABASE_URL',
      ])
        delete process.env[name];
      Object.assign(process.env, db.env);
      taken.close();
      await postgres.drop();
    }
  });

  it('migrates, creates a user, creates a session for them and rotates keys', async () => {
    expect((await svc('migrate')).code).toBe(0);
    expect((await svc('migrate')).out).toBe('up to date');
    const created = await svc(
      'users',
      'create',
      '--username',
      'marie',
      '--password',
      'radium-radium',
      '--image-url',
      'https://img.example/m.png',
    );
    expect(created.code).toBe(0);
    expect(JSON.parse(created.out)).toMatchObject({
      object: 'user',
      username: 'marie',
      image_url: 'https://img.example/m.png',
    });
    const taken = await svc('users', 'create', '--username', 'marie', '--password', 'radium-radium');
    expect(taken).toMatchObject({ code: 2, err: 'svc: username marie is taken' });
    // Neither way of giving the password: the message names the one to prefer (it said "--password is required").
    expect(await svc('users', 'create', '--username', 'pierre')).toMatchObject({
      code: 2,
      err: expect.stringContaining('svc: --password-stdin (or --password PW) is required'),
    });
    const weak = await svc('users', 'create', '--username', 'pierre', '--password', 'short');
    expect(weak.code).toBe(2);
    const session = await svc('sessions', 'create', '--username', 'marie');
    expect(session.code).toBe(0);
    expect(JSON.parse(session.out)).toMatchObject({ object: 'session', token: expect.stringMatching(/^ey/) });
    expect((await svc('sessions', 'create', '--username', 'nobody')).err).toBe('svc: no user named nobody');
    // The name as the sign-in page reads it (domain/users.ts, canonicalUsername).
    expect((await svc('sessions', 'create', '--username', ' Marie')).code).toBe(0);
    const rotated = await svc('keys', 'rotate');
    expect(rotated.out).toMatch(/^signing with new key \w+$/);
    const keys = await withStore((db) =>
      db.selectFrom('signing_keys').select(['kid', 'retired_at']).execute(),
    );
    expect(keys.filter((k) => k.retired_at === null)).toHaveLength(1);
    expect(keys.length).toBeGreaterThanOrEqual(2);
  });

  it('pins a user and an OAuth client to an API version, and clears the pins', async () => {
    const userPin = async (username: string) =>
      (
        await withStore((db) =>
          db.selectFrom('users').select('api_version').where('username', '=', username).executeTakeFirst(),
        )
      )?.api_version;
    const clientPin = async (clientId: string) =>
      (
        await withStore((db) =>
          db
            .selectFrom('oauth_clients')
            .select('api_version')
            .where('client_id', '=', clientId)
            .executeTakeFirst(),
        )
      )?.api_version;
    expect((await svc('users', 'pin', '--username', 'marie', '--api-version', '2026-09-24.albus')).code).toBe(
      0,
    );
    expect(await userPin('marie')).toBe('2026-09-24.albus');
    expect((await svc('users', 'pin', '--username', 'Marie', '--api-version', 'none')).code).toBe(0);
    expect(await userPin('marie')).toBeNull();
    expect(
      await svc('users', 'pin', '--username', 'marie', '--api-version', '2099-01-01.future'),
    ).toMatchObject({ code: 2 });
    expect(await svc('users', 'pin', '--username', 'nobody', '--api-version', 'none')).toMatchObject({
      code: 2,
      err: 'svc: no user named nobody',
    });

    await withStore((db) =>
      db
        .insertInto('oauth_clients')
        .values({
          client_id: 'cli-test',
          kind: 'dcr',
          metadata: '{}',
          api_version: null,
          created_at: 0,
          last_used_at: null,
        })
        .execute(),
    );
    expect(
      (await svc('clients', 'pin', '--client-id', 'cli-test', '--api-version', '2026-09-24.albus')).code,
    ).toBe(0);
    expect(await clientPin('cli-test')).toBe('2026-09-24.albus');
    expect(await svc('clients', 'pin', '--client-id', 'nope', '--api-version', 'none')).toMatchObject({
      code: 2,
    });
    // A pre-registered client (from the operator's file, no row of its own) is pinnable too, and unpinnable.
    expect(
      (await svc('clients', 'pin', '--client-id', 'claude-code', '--api-version', '2026-09-24.albus')).code,
    ).toBe(0);
    expect(await clientPin('claude-code')).toBe('2026-09-24.albus');
    expect((await svc('clients', 'pin', '--client-id', 'claude-code', '--api-version', 'none')).code).toBe(0);
    expect(await clientPin('claude-code')).toBeNull();
  });

  it('refuses the demo seed in production', async () => {
    process.env['NODE_ENV'] = 'production';
    try {
      const r = await svc('seed-demo');
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/never run in production/);
    } finally {
      process.env['NODE_ENV'] = 'test';
    }
  });

  it('refuses to start in production without every public URL, naming those unset, before it listens', async () => {
    const saved = { ...process.env };
    Object.assign(process.env, {
      NODE_ENV: 'production',
      BASE_URL: 'https://api.example.com',
      AUTH_URL: 'https://auth.example.com',
    });
    try {
      const r = await svc('start');
      expect(r.code).toBe(2);
      expect(r.err).toBe(
        'svc: MCP_URL, AGENCY_MCP_URL must be set when NODE_ENV=production: the public URLs clients use (the ' +
          'token issuer and audiences), which would otherwise be the listen addresses',
      );
    } finally {
      process.env = saved;
    }
  });

  it('seeds the demo accounts once', async () => {
    expect((await svc('seed-demo')).out).toBe('created ada, grace, linus');
    expect((await svc('seed-demo')).out).toBe('demo already seeded');
  });
});
