import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, register, token } from '../auth/oauth-helpers.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { logged, postSession } from '../helpers/ops.js';

/**
 * The embedded database's write lock held by another process — a `svc start --only` sibling on the same `DATA_DIR`
 * in a long write, a `svc` command, a `sqlite3` shell left in a transaction. The lock is really held, by a second
 * process with its own connection to the file. Writes wait for it (a sign-in through Kysely, a refresh rotation
 * through the group commit), the rest of the process answers meanwhile — `/health`, and `/me` with a token never
 * seen, whose session and user are read from the database — and a write still waiting after
 * DATABASE_CONNECT_TIMEOUT_MS is 503 with Retry-After. Before, SQLite's own busy wait held the event loop: every
 * surface stopped answering until the lock was released or the wait ran out (measured by hand: the whole 10 s of a
 * 10 s lock).
 */

const REDIRECT = 'http://127.0.0.1:9999/callback';
// Long enough that what is checked while the writes wait is answered well within it on a loaded machine.
const LOCK_WAIT_MS = 3000;
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    env: {
      DATABASE_CONNECT_TIMEOUT_MS: String(LOCK_WAIT_MS),
      SIGNIN_LIMIT_PER_IP: '10000',
      SIGNIN_LIMIT_PER_USERNAME: '10000',
    },
  });
});
afterAll(() => server?.close());
/** Every holder a test started, released even when the test failed before releasing it. */
const holders = new Set<{ release(): Promise<void> }>();
afterEach(async () => {
  for (const holder of holders) await holder.release();
  holders.clear();
});

const HOLDER = `
const Database = require(process.argv[1]);
const db = new Database(process.argv[2]);
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\\n');
process.stdin.once('data', () => {
  db.exec('COMMIT');
  db.close();
  process.stdout.write('released\\n');
  process.exit(0);
});
`;

/** Another process holding the database's write lock until `release`. */
async function holdWriteLock(): Promise<{ release(): Promise<void> }> {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const file = join(server.config.dataDir, 'svc.sqlite');
  const holder: ChildProcessWithoutNullStreams = spawn(process.execPath, ['-e', HOLDER, driver, file]);
  await untilPrinted(holder, 'locked');
  let released = false;
  const lock = {
    async release() {
      if (released) return;
      released = true;
      const exited = once(holder, 'exit');
      holder.stdin.write('go\n');
      await untilPrinted(holder, 'released');
      await exited;
    },
  };
  holders.add(lock);
  return lock;
}

function untilPrinted(child: ChildProcessWithoutNullStreams, word: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (chunk: Buffer) => {
      out += String(chunk);
      if (!out.includes(word)) return;
      child.stdout.off('data', onData);
      child.off('exit', onExit);
      resolve();
    };
    const onExit = () => reject(new Error(`the lock holder ended without printing "${word}": ${out}`));
    child.stdout.on('data', onData);
    child.once('exit', onExit);
  });
}

/** A promise with whether it has settled yet. */
function tracked<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return { promise, settled: () => settled };
}

describe.runIf(ENGINE === 'sqlite')('the write lock held by another process (sqlite)', () => {
  it('writes wait for it off the event loop while everything else answers, and run once it is released', async () => {
    const clientId = (await register(server, { redirect_uris: [REDIRECT], client_name: 'Host' })).body[
      'client_id'
    ] as string;
    const { tokens } = await connect(server, { clientId, redirectUri: REDIRECT });
    // Signed in before the lock, never used: /me must read its session's liveness from the database.
    const { token: unseen } = await signIn(server, 'linus');

    const lock = await holdWriteLock();
    // A write through Kysely, begun first: it holds Kysely's one connection when it meets the lock.
    const kyselyWaiting = tracked(
      sql`UPDATE users SET username = username WHERE 0 = 1`.execute(server.services.ctx.db),
    );
    const signInWaiting = tracked(postSession(server.url.auth, 'grace'));
    const rotationWaiting = tracked(
      token(server, {
        grant_type: 'refresh_token',
        refresh_token: tokens['refresh_token']!,
        client_id: clientId,
      }),
    );

    expect((await fetch(`${server.url.api}/health`)).status).toBe(200);
    const me = await fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${unseen}` } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { username: string }).username).toBe('linus');
    // A read through Kysely while that write waits: the waiting statement hands the connection back between tries.
    const read = await server.services.ctx.db
      .selectFrom('users')
      .select('username')
      .where('username', '=', 'grace')
      .executeTakeFirst();
    expect(read?.username).toBe('grace');
    // Answered while the writes still wait for the lock.
    expect(kyselyWaiting.settled()).toBe(false);
    expect(signInWaiting.settled()).toBe(false);
    expect(rotationWaiting.settled()).toBe(false);

    await lock.release();
    await kyselyWaiting.promise;
    expect((await signInWaiting.promise).status).toBe(201);
    const rotated = await rotationWaiting.promise;
    expect(rotated.res.status).toBe(200);
    expect(rotated.body['refresh_token']).toEqual(expect.any(String));
    expect(logged(server.logs, 'database unavailable')).toHaveLength(0);
  });

  it('a write still waiting after DATABASE_CONNECT_TIMEOUT_MS is 503 with Retry-After, nothing written', async () => {
    const sessions = async () =>
      Number(
        (
          await server.services.ctx.db
            .selectFrom('sessions')
            .select((e) => e.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await sessions();
    const lock = await holdWriteLock();
    try {
      const started = performance.now();
      const refused = await postSession(server.url.auth, 'linus');
      expect(performance.now() - started).toBeGreaterThanOrEqual(LOCK_WAIT_MS - 50);
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('service_unavailable');
      expect((await fetch(`${server.url.api}/health`)).status).toBe(200);
      expect(await sessions()).toBe(before);
    } finally {
      await lock.release();
    }
    const warnings = logged(server.logs, 'database unavailable');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'SQLITE_BUSY' });
    expect((await postSession(server.url.auth, 'linus')).status).toBe(201);
  });
});
