import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WRITES_SETTLE_MS } from '../../src/http/dependency-outage.js';
import { connect, register, token as tokenRequest } from '../auth/oauth-helpers.js';
import { freshDatabase, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { dependencyUp, logged as loggedLines, postSession } from '../helpers/ops.js';

/**
 * PostgreSQL turned read-only under the instance, always against PostgreSQL: what a failover leaves for the
 * connections that still reach the demoted primary (a managed service's endpoint or a DNS name not yet moved, a
 * pooler): every write refused with 25006 `read_only_sql_transaction`, reads served. Played with a role of the test's
 * own whose sessions start read-only (`default_transaction_read_only`) and whose backends are terminated, so that the
 * pool reconnects read-only; the failover's end is the role's setting reset, after which new connections write. Writes
 * are refused 503 with Retry-After, never 500; reads go on; the log says so once each way; the read-only connections
 * are dropped, so the instance writes again by itself.
 */

const PG_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROLE = `svc_ro_${randomBytes(4).toString('hex')}`;
let server: TestServer;
let drop: () => Promise<void>;
let admin: pg.Client;

beforeAll(async () => {
  admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE ROLE ${ROLE} LOGIN SUPERUSER`);
  const db = await freshDatabase('postgres');
  drop = db.drop;
  const url = new URL(db.env['DATABASE_URL']!);
  url.username = ROLE;
  url.searchParams.set('application_name', ROLE);
  server = await startTestServer({
    env: {
      ...db.env,
      DATABASE_URL: url.toString(),
      DATABASE_POOL_SIZE: '4',
      LIVENESS_CACHE_SECONDS: '0',
      METRICS_PORT: '0',
      SIGNIN_LIMIT_PER_IP: '10000',
      SIGNIN_LIMIT_PER_USERNAME: '10000',
      DCR_LIMIT_PER_IP: '1000',
    },
  });
});
afterAll(async () => {
  await server?.close();
  await drop?.();
  await admin?.query(`DROP ROLE IF EXISTS ${ROLE}`);
  await admin?.end();
});

const logged = (message: string) => loggedLines(server.logs, message);
const writesUp = () => dependencyUp(server.services.metricsUrl!, 'database_writes');

describe('PostgreSQL read-only after a failover (always PostgreSQL)', () => {
  it('writes are refused 503 with Retry-After, reads are served, and writes come back by themselves', async () => {
    const { token } = await signIn(server);
    const me = () => fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${token}` } });
    const redirectUri = 'http://127.0.0.1:9999/callback';
    const clientId = (await register(server, { redirect_uris: [redirectUri], client_name: 'Host' })).body[
      'client_id'
    ] as string;
    const { tokens } = await connect(server, { clientId, redirectUri });
    const refresh = () =>
      tokenRequest(server, {
        grant_type: 'refresh_token',
        refresh_token: tokens['refresh_token']!,
        client_id: clientId,
      });

    // The failover: this role's sessions start read-only, and its connections are cut (the old primary restarts).
    await admin.query(`ALTER ROLE ${ROLE} SET default_transaction_read_only = on`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
      ROLE,
    ]);
    const statuses = new Set<number>();
    let refused: Response | undefined;
    for (let i = 0; i < 20 && !refused; i++) {
      const res = await postSession(server.url.auth, 'ada');
      statuses.add(res.status);
      if (res.status === 503 && logged('database refuses writes').length > 0) refused = res;
      else await res.arrayBuffer();
    }
    // 503 only: the cut connections (57P01) and then the read-only ones (25006).
    expect(statuses).toEqual(new Set([503]));
    expect(refused!.headers.get('retry-after')).toBe('5');
    expect(((await refused!.json()) as { error: { code: string } }).error.code).toBe('service_unavailable');
    expect(String(logged('database refuses writes')[0]!['reason'])).toContain('read-only transaction');
    expect(await writesUp()).toBe(0);
    // Reads are served, the liveness of the session read from the database on every request.
    expect((await me()).status).toBe(200);
    // A rotation (one shared statement on PostgreSQL) is refused whole, in the OAuth shape.
    const rotation = await refresh();
    expect(rotation.res.status).toBe(503);
    expect(rotation.body['error']).toBe('temporarily_unavailable');

    // The address reaches the new primary: new connections write. The read-only ones are dropped when refused.
    await admin.query(`ALTER ROLE ${ROLE} RESET default_transaction_read_only`);
    const back = new Set<number>();
    for (let i = 0; i < 20 && !back.has(201); i++) {
      const res = await postSession(server.url.auth, 'ada');
      back.add(res.status);
      await res.arrayBuffer();
    }
    expect(back).toContain(201);
    server.clock.advance(WRITES_SETTLE_MS);
    expect((await postSession(server.url.auth, 'ada')).status).toBe(201);
    expect(logged('database accepts writes again')).toHaveLength(1);
    // The refused rotation wrote nothing: its token is still the chain's.
    expect((await refresh()).res.status).toBe(200);
    expect(logged('database refuses writes')).toHaveLength(1);
    expect(await writesUp()).toBe(1);
    expect(logged('unhandled error')).toEqual([]);
  });
});
