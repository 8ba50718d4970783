import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agencyToolCallWorks, connect, token } from '../auth/oauth-helpers.js';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { freePort } from '../helpers/ops.js';

/**
 * PostgreSQL behind a pooler in transaction mode (PgBouncer's `pool_mode = transaction`), always against PostgreSQL:
 * each transaction may run on another server connection, and a server connection serves many clients. Debian's
 * PgBouncer (1.18) refuses session settings sent at connect ("unsupported startup parameter") and knows nothing of the
 * statements a client named on a server connection: the service's named statements failed on most requests there
 * ("prepared statement \"svc_1\" already exists", by hand: 63 of 80 `GET /me` answered 500). With
 * DATABASE_TRANSACTION_POOLER=on the service sends neither. The test runs its own PgBouncer, two server connections for
 * eight of the service's, so that statements of different requests meet on one server connection.
 */

const PG_URL = new URL(process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test');
const DATABASE = `svc_pooler_${randomBytes(4).toString('hex')}`;
const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p)) ?? 'pgbouncer';
let dir: string;
let bouncer: ChildProcess;
let server: TestServer;
let admin: pg.Client;

/** PgBouncer will not run as root: as the PostgreSQL server's own user, then. */
function unprivileged(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

beforeAll(async () => {
  admin = new pg.Client({ connectionString: PG_URL.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${DATABASE}`);
  dir = mkdtempSync(join(tmpdir(), 'svc-pgbouncer-'));
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
      'pool_mode = transaction',
      'default_pool_size = 2',
      'max_client_conn = 100',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
    ].join('\n'),
  );
  bouncer = spawn(PGBOUNCER, [join(dir, 'pgbouncer.ini')], { stdio: 'ignore', ...unprivileged() });
  const url = new URL(PG_URL.toString());
  url.port = String(port);
  url.pathname = `/${DATABASE}`;
  for (let i = 0; i < 50; i++) {
    const probe = new pg.Client({ connectionString: url.toString() });
    const up = await probe.connect().then(
      () => true,
      () => false,
    );
    await probe.end().catch(() => {});
    if (up) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  server = await startTestServer({
    env: {
      DATABASE_URL: url.toString(),
      DATABASE_TRANSACTION_POOLER: 'on',
      DATABASE_POOL_SIZE: '8',
      SIGNIN_LIMIT_PER_IP: '10000',
      SIGNIN_LIMIT_PER_USERNAME: '10000',
      DCR_LIMIT_PER_IP: '1000',
    },
  });
}, 60_000);
afterAll(async () => {
  await server?.close();
  bouncer?.kill();
  await admin?.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
  await admin?.end();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('PostgreSQL behind PgBouncer in transaction mode (always PostgreSQL)', () => {
  it('migrated and seeded through it; sign-ins, /me, refresh rotations and agency tool calls, many at once, none failing', async () => {
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
  }, 60_000);
});
