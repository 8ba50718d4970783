import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneExpired } from '../../src/domain/pruning.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * The store keeps what is in use, not every session ever made: a script that signs in on every run left one row a run
 * for good. A session that ended (expired, or revoked and then expired) is deleted an hour after its end, at the next
 * sign-in (or authorization, or refresh) once the hourly prune is due; its tokens stay refused.
 */

const TTL_SECONDS = 600;
const HOUR_MS = 3600_000;
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ env: { SESSION_TTL_SECONDS: String(TTL_SECONDS) } });
});
afterAll(() => server?.close());

const sessionIds = async () =>
  (await server.services.ctx.db.selectFrom('sessions').select('id').execute()).map((r) => r.id);
const me = (token: string) =>
  fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);

describe(`sessions that ended are pruned (${ENGINE})`, () => {
  it('an hour after their end, at the next sign-in; live ones stay, and an ended one is still refused', async () => {
    const expired = await signIn(server, 'ada');
    const revoked = await signIn(server, 'grace');
    const ended = await fetch(`${server.url.auth}/api/sessions/current`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${revoked.token}` },
    });
    expect(ended.status).toBe(204);
    // Not yet an hour past their end: kept (for diagnosis), even when the prune is due.
    server.clock.advance(TTL_SECONDS * 1000 + HOUR_MS - 60_000);
    const kept = await signIn(server, 'linus');
    expect(await sessionIds()).toEqual(expect.arrayContaining([expired.id, revoked.id, kept.id]));
    // An hour and more past their end, the next sign-in once the hourly prune is due again deletes them.
    server.clock.advance(HOUR_MS + 1);
    const live = await signIn(server, 'ada');
    const ids = await sessionIds();
    expect(ids).not.toContain(expired.id);
    expect(ids).not.toContain(revoked.id);
    expect(ids).toEqual(expect.arrayContaining([kept.id, live.id]));
    expect(await me(expired.token)).toBe(401);
    expect(await me(revoked.token)).toBe(401);
    expect(await me(live.token)).toBe(200);
  });

  it('a backlog goes in batches, at most so many a run, the rest in the next runs', async () => {
    const { db, clock } = server.services.ctx;
    const userId = (
      await db.selectFrom('users').select('id').where('username', '=', 'ada').executeTakeFirstOrThrow()
    ).id;
    const long = clock.now() - 2 * HOUR_MS;
    const backlog = Array.from({ length: 14 }, (_, i) => ({
      id: `ses_backlog${String(i).padStart(4, '0')}`,
      user_id: userId,
      created_at: long - TTL_SECONDS * 1000,
      expires_at: long,
      revoked_at: null,
    }));
    await db.insertInto('sessions').values(backlog).execute();
    const left = async () =>
      (await db.selectFrom('sessions').select('id').where('id', 'like', 'ses_backlog%').execute()).length;
    await pruneExpired(db, clock, { size: 3, most: 4 });
    expect(await left()).toBe(2);
    await pruneExpired(db, clock, { size: 3, most: 4 });
    expect(await left()).toBe(0);
  });
});
