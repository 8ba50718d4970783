import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, signIn, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * PostgreSQL faults as production meets them, always against PostgreSQL whatever TEST_DATABASE says (the embedded
 * database has no server to lose): a restart or failover terminates the backends with requests in flight (57P01).
 * The process must stay up, answer 503 with Retry-After (never 500), log the outage once, and serve again by itself.
 * Only this test's own backends are terminated, found by their application_name.
 */

const PG_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const APP = `svc-fault-${randomBytes(4).toString('hex')}`;
let server: TestServer;
let drop: () => Promise<void>;
let admin: pg.Client;

beforeAll(async () => {
  const db = await freshDatabase('postgres');
  drop = db.drop;
  const url = new URL(db.env['DATABASE_URL']!);
  url.searchParams.set('application_name', APP);
  server = await startTestServer({
    env: { ...db.env, DATABASE_URL: url.toString(), LIVENESS_CACHE_SECONDS: '0' },
  });
  admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  await server?.close();
  await drop?.();
});

const terminateOurBackends = async () =>
  (
    await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
      [APP],
    )
  ).rowCount ?? 0;

describe('PostgreSQL backends terminated under load (57P01)', () => {
  it('the process stays up, answers 200 or 503 with Retry-After (never 500), logs once, and recovers', async () => {
    const { token } = await signIn(server);
    const me = () => fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${token}` } });
    const statuses: number[] = [];
    const retryAfter: (string | null)[] = [];
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const batch = await Promise.all(Array.from({ length: 8 }, () => me()));
        for (const res of batch) {
          statuses.push(res.status);
          if (res.status === 503) retryAfter.push(res.headers.get('retry-after'));
          await res.arrayBuffer();
        }
      }
    })();
    let terminated = 0;
    for (let round = 0; round < 8; round++) {
      terminated += await terminateOurBackends();
      await new Promise((r) => setTimeout(r, 40));
    }
    stop = true;
    await load;
    expect(terminated).toBeGreaterThan(0);
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
    expect(retryAfter.every((v) => v === '5')).toBe(true);
    // It serves again by itself.
    let recovered = false;
    for (let i = 0; i < 50 && !recovered; i++) recovered = (await me()).status === 200;
    expect(recovered).toBe(true);
    // No stack per request: unexpected-error lines are absent.
    expect(server.logs.lines.filter((l) => l['msg'] === 'unhandled error')).toEqual([]);
  });
});
