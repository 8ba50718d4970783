import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WRITES_SETTLE_MS } from '../../src/http/dependency-outage.js';
import { grant } from '../agency-mcp/helpers.js';
import { connect, register, token } from '../auth/oauth-helpers.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { modernRequest } from '../helpers/mcp.js';
import { dependencyUp, logged as loggedLines, postSession } from '../helpers/ops.js';

/**
 * The database with no room left for a write, as a full disk leaves it, on the run's engine: the embedded database
 * gets SQLite's own SQLITE_FULL, its pages capped at the file's size (`max_page_count`: the error a full disk gives,
 * which a 16 MB tmpfs filled by hand gave the same way); PostgreSQL gets 53100 `disk_full` from a trigger on this
 * test's tables (filling a disk for real needs a tablespace on a file system of its own). Writes are refused 503 with
 * Retry-After in each surface's shape, never 500 with a stack; reads go on; the log says so once each way, and
 * `svc_dependency_up{dependency="database_writes"}` follows while `database` stays up.
 */

const REDIRECT = 'http://127.0.0.1:9999/callback';
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    env: {
      METRICS_PORT: '0',
      SIGNIN_LIMIT_PER_IP: '10000',
      SIGNIN_LIMIT_PER_USERNAME: '10000',
      DCR_LIMIT_PER_IP: '1000',
    },
  });
});
afterAll(() => server?.close());

/** SQLite's default page cap, restored when the test frees its "disk". */
const SQLITE_MAX_PAGES = 4_294_967_294;

async function fillStorage(): Promise<void> {
  const db = server.services.ctx.db;
  if (ENGINE === 'sqlite') {
    // Capped at the file's current size (SQLite never lowers it below that): every write that needs a page fails.
    await sql`PRAGMA max_page_count = 1`.execute(db);
    return;
  }
  await sql`CREATE FUNCTION storage_full() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`.execute(
    db,
  );
  for (const table of ['sessions', 'refresh_tokens', 'clients']) {
    await sql`CREATE TRIGGER storage_full BEFORE INSERT OR UPDATE ON ${sql.table(table)}
      FOR EACH ROW EXECUTE FUNCTION storage_full()`.execute(db);
  }
}

async function freeStorage(): Promise<void> {
  const db = server.services.ctx.db;
  if (ENGINE === 'sqlite')
    await sql`PRAGMA max_page_count = ${sql.raw(String(SQLITE_MAX_PAGES))}`.execute(db);
  else await sql`DROP FUNCTION storage_full() CASCADE`.execute(db);
}

/**
 * Runs `write` until the database refuses it (SQLite still fits a row into a page with room: it is refused once it
 * needs a new page), at most 500 times; the statuses it met, and the refusal.
 */
async function untilRefused(
  write: () => Promise<Response>,
): Promise<{ statuses: Set<number>; refused: Response }> {
  const statuses = new Set<number>();
  for (let i = 0; i < 500; i++) {
    const res = await write();
    statuses.add(res.status);
    if (res.status === 503) return { statuses, refused: res };
    await res.arrayBuffer();
  }
  throw new Error(`no write refused in 500: ${[...statuses].join(', ')}`);
}

const dependency = (name: string) => dependencyUp(server.services.metricsUrl!, name);
const logged = (message: string) => loggedLines(server.logs, message).length;

describe(`a database with no room for writes (${ENGINE})`, () => {
  it("refuses writes 503 with Retry-After in each surface's shape, serves reads, logs once each way, and recovers", async () => {
    const { token: session } = await signIn(server);
    const clientId = (await register(server, { redirect_uris: [REDIRECT], client_name: 'Host' })).body[
      'client_id'
    ] as string;
    const { tokens } = await connect(server, { clientId, redirectUri: REDIRECT });
    const refresh = () =>
      token(server, {
        grant_type: 'refresh_token',
        refresh_token: tokens['refresh_token']!,
        client_id: clientId,
      });

    const agency = await grant(server, { username: 'ada' });
    const createClient = (n: number) =>
      modernRequest(
        `${server.url.agencyMcp}/mcp`,
        'tools/call',
        { name: 'create_client', arguments: { name: `Client ${n}` } },
        { token: agency.token },
      );

    await fillStorage();
    const signIns = await untilRefused(() => postSession(server.url.auth, 'ada'));
    expect(signIns.statuses).toEqual(new Set(ENGINE === 'sqlite' ? [201, 503] : [503]));
    expect(signIns.refused.headers.get('retry-after')).toBe('5');
    expect(((await signIns.refused.json()) as { error: { code: string } }).error.code).toBe(
      'service_unavailable',
    );
    let n = 0;
    const toolCalls = await untilRefused(() => createClient(++n));
    expect(toolCalls.statuses).toEqual(new Set(ENGINE === 'sqlite' ? [200, 503] : [503]));
    expect(toolCalls.refused.headers.get('retry-after')).toBe('5');
    expect(((await toolCalls.refused.json()) as { error?: { code: number } }).error?.code).toBe(-32000);

    // Reads are served meanwhile.
    const me = await fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${session}` } });
    expect(me.status).toBe(200);
    // Still in rotation (every instance shares the one database: a 503 would stop the reads too), and saying why.
    const ready = await fetch(`${server.url.api}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: 'degraded',
      checks: { database: 'up', database_writes: 'down' },
    });
    if (ENGINE === 'postgres') {
      // A rotation writes two rows in one statement: refused whole, in the OAuth shape (RFC 6749 §5.2 has no 503
      // code of its own; `temporarily_unavailable` is §4.1.2.1's).
      const { res, body } = await refresh();
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(body['error']).toBe('temporarily_unavailable');
    }
    expect(logged('database refuses writes')).toBe(1);
    expect(logged('database unavailable')).toBe(0);
    expect(logged('unhandled error')).toBe(0);
    expect(await dependency('database_writes')).toBe(0);
    expect(await dependency('database')).toBe(1);

    await freeStorage();
    expect((await postSession(server.url.auth, 'ada')).status).toBe(201);
    // Writes accepted again, but not yet for long: near a full disk some fit between refused ones.
    expect(logged('database accepts writes again')).toBe(0);
    server.clock.advance(WRITES_SETTLE_MS);
    expect((await postSession(server.url.auth, 'ada')).status).toBe(201);
    expect((await createClient(++n)).status).toBe(200);
    expect(logged('database accepts writes again')).toBe(1);
    expect(await dependency('database_writes')).toBe(1);
    expect(await (await fetch(`${server.url.api}/ready`)).json()).toMatchObject({ status: 'ready' });
    // The refused rotation wrote nothing: the token it was given is still the chain's.
    const { res, body } = await refresh();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(logged('database refuses writes')).toBe(1);
    expect(logged('unhandled error')).toBe(0);
  });
});
