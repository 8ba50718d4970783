import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { agencyToolCallWorks, connect, token } from '../auth/oauth-helpers.js';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { freePort, within } from '../helpers/ops.js';

/**
 * PostgreSQL behind PgBouncer, always against PostgreSQL, a PgBouncer of the test's own (Debian's, 1.18); in transaction
 * mode with two server connections for the service's eight, so that statements of different requests meet on one.
 *
 * In either mode PgBouncer refuses the startup parameters it does not track: the service sent its statement and idle
 * timeouts so, and did not start through it ("unsupported startup parameter: statement_timeout"); it now sets them by
 * a statement once connected. In transaction mode each transaction may run on another server connection, and a server
 * connection serves many clients: the service's named statements failed on most requests there ("prepared statement
 * \"svc_1\" already exists", by hand: 63 of 80 `GET /me` answered 500); with DATABASE_TRANSACTION_POOLER=on it names
 * none and sets nothing.
 */

const PG_URL = new URL(process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test');
const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p)) ?? 'pgbouncer';

/** PgBouncer will not run as root: as the PostgreSQL server's own user, then. */
function unprivileged(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

interface Bounced {
  server: TestServer;
  close(): Promise<void>;
}

/** A database of its own behind a PgBouncer in `mode`, and the service on it with `env`. */
async function behindPgBouncer(
  mode: 'session' | 'transaction',
  env: Record<string, string>,
): Promise<Bounced> {
  const database = `svc_pgbouncer_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const dir = mkdtempSync(join(tmpdir(), 'svc-pgbouncer-'));
  chmodSync(dir, 0o777);
  const port = await freePort();
  writeFileSync(join(dir, 'users.txt'), `"${PG_URL.username || 'postgres'}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${PG_URL.hostname} port=${PG_URL.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `pool_mode = ${mode}`,
      // Session mode holds a server connection for each of the service's: as many as its pool.
      `default_pool_size = ${mode === 'transaction' ? 2 : 8}`,
      'max_client_conn = 100',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
    ].join('\n'),
  );
  const bouncer: ChildProcess = spawn(PGBOUNCER, [join(dir, 'pgbouncer.ini')], {
    stdio: 'ignore',
    ...unprivileged(),
  });
  const url = new URL(PG_URL.toString());
  url.port = String(port);
  url.pathname = `/${database}`;
  await within(async () => {
    const probe = new pg.Client({ connectionString: url.toString() });
    const up = await probe.connect().then(
      () => true,
      () => false,
    );
    await probe.end().catch(() => {});
    return up;
  }, 5000);
  const close = async (server?: TestServer) => {
    await server?.close();
    bouncer.kill();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const server = await startTestServer({
      env: {
        DATABASE_URL: url.toString(),
        DATABASE_POOL_SIZE: '8',
        SIGNIN_LIMIT_PER_IP: '10000',
        SIGNIN_LIMIT_PER_USERNAME: '10000',
        DCR_LIMIT_PER_IP: '1000',
        ...env,
      },
    });
    return { server, close: () => close(server) };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * Sign-ins, `/me`, four refresh chains rotated ten times and an agency tool call, many at once through the pooler: all
 * 200, no error logged, and reuse detection still ends a connection.
 */
async function everyPathWorks(server: TestServer): Promise<void> {
  const chains = await Promise.all(Array.from({ length: 4 }, () => connect(server)));
  const statuses: number[] = [];
  const rotate = async (chain: (typeof chains)[number]) => {
    let refresh = chain.tokens['refresh_token']!;
    for (let i = 0; i < 10; i++) {
      const { res, body } = await token(server, {
        grant_type: 'refresh_token',
        refresh_token: refresh,
        client_id: chain.clientId,
      });
      statuses.push(res.status);
      refresh = body['refresh_token'] ?? refresh;
    }
    return refresh;
  };
  const signInAndMe = async (user: string) => {
    for (let i = 0; i < 10; i++) {
      const { token: session } = await signIn(server, user);
      const me = await fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${session}` } });
      statuses.push(me.status);
    }
  };
  const [latest] = await Promise.all([
    Promise.all(chains.map(rotate)),
    ...['ada', 'grace', 'linus'].map(signInAndMe),
  ]);
  expect(statuses.filter((s) => s !== 200)).toEqual([]);
  expect(statuses).toHaveLength(4 * 10 + 3 * 10);

  // The agency MCP server's tool call: the token exchange and the per-call checks, through the pooler too.
  const { body } = await token(server, {
    grant_type: 'refresh_token',
    refresh_token: latest[1]!,
    client_id: chains[1]!.clientId,
  });
  expect(await agencyToolCallWorks(server, body['access_token']!)).toBe(true);
  // Reuse detection holds: the first refresh token of a chain, long rotated, is refused and ends the connection.
  const replay = await token(server, {
    grant_type: 'refresh_token',
    refresh_token: chains[0]!.tokens['refresh_token']!,
    client_id: chains[0]!.clientId,
  });
  expect(replay.res.status).toBe(400);
  expect(replay.body['error']).toBe('invalid_grant');
  const ended = await token(server, {
    grant_type: 'refresh_token',
    refresh_token: latest[0]!,
    client_id: chains[0]!.clientId,
  });
  expect(ended.res.status).toBe(400);

  expect(server.logs.lines.filter((l) => (l['level'] as number) >= 50)).toEqual([]);
}

describe('PostgreSQL behind PgBouncer (always PostgreSQL)', () => {
  it('in transaction mode with DATABASE_TRANSACTION_POOLER=on: migrated and seeded through it, every path works', async () => {
    const bounced = await behindPgBouncer('transaction', { DATABASE_TRANSACTION_POOLER: 'on' });
    try {
      await everyPathWorks(bounced.server);
    } finally {
      await bounced.close();
    }
  }, 60_000);

  it('in session mode with no setting: every path works, and statements are bounded by DATABASE_STATEMENT_TIMEOUT_MS', async () => {
    const bounced = await behindPgBouncer('session', {});
    try {
      await everyPathWorks(bounced.server);
      const shown = await sql<{ statement_timeout: string }>`SHOW statement_timeout`.execute(
        bounced.server.services.ctx.db,
      );
      expect(shown.rows[0]!.statement_timeout).toBe('10s');
    } finally {
      await bounced.close();
    }
  }, 60_000);
});
