import type { Kysely } from 'kysely';
import type { PreparedSql } from '../store/prepared.js';
import type { Database, SessionsTable } from '../store/schema.js';
import type { Clock } from '../base/clock.js';
import { newId } from '../base/ids.js';
import { pruneExpiredHourly } from './pruning.js';

export type SessionRow = SessionsTable;

/**
 * The two credentials a user signs in for, never interchangeable (docs/security.md#credentials): an API session
 * (`ses_…`, the bearer token agents and scripts use at the REST API and the user MCP server) and a browser session
 * (`web_…`, the cookie issued only by the sign-in page, the one credential that opens the pages, consent and the
 * dashboard). The kind is in the id, which the signed token carries in `sid`.
 */
export type SessionKind = 'api' | 'browser';

export const sessionKindOf = (sessionId: string): SessionKind | undefined =>
  sessionId.startsWith('ses_') ? 'api' : sessionId.startsWith('web_') ? 'browser' : undefined;

export async function createSession(
  db: Kysely<Database>,
  clock: Clock,
  userId: string,
  ttlSeconds: number,
  kind: SessionKind = 'api',
): Promise<SessionRow> {
  const now = clock.now();
  const row: SessionRow = {
    id: newId(kind === 'api' ? 'ses' : 'web'),
    user_id: userId,
    created_at: now,
    expires_at: now + ttlSeconds * 1000,
    revoked_at: null,
  };
  await db.insertInto('sessions').values(row).execute();
  // Where sessions are made, sessions are pruned: a deployment whose callers only sign in prunes too.
  await pruneExpiredHourly(db, clock);
  return row;
}

/**
 * Ends a session (idempotent: the first revocation time is kept) and drops its cached liveness in this process, so
 * this instance refuses its tokens at once (other instances within the liveness bound). The one way to end a session.
 */
export async function endSession(
  deps: { db: Kysely<Database>; clock: Clock; sessionLiveness: { forget(sessionId: string): void } },
  sessionId: string,
): Promise<void> {
  await deps.db
    .updateTable('sessions')
    .set({ revoked_at: deps.clock.now() })
    .where('id', '=', sessionId)
    .where('revoked_at', 'is', null)
    .execute();
  deps.sessionLiveness.forget(sessionId);
}

/**
 * Ends every session of a user, API and browser alike (the first revocation time of each is kept). Returns how many
 * it ended. Instances refuse their tokens within the liveness bound: this may run in another process (the CLI).
 */
export async function endUserSessions(db: Kysely<Database>, clock: Clock, userId: string): Promise<number> {
  const r = await db
    .updateTable('sessions')
    .set({ revoked_at: clock.now() })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows);
}

const SESSION_LIVENESS = 'SELECT expires_at, revoked_at FROM sessions WHERE id = $1';

export async function isSessionLive(sql: PreparedSql, clock: Clock, sessionId: string): Promise<boolean> {
  // Prepared: it runs on every liveness-cache miss, so on every request once more sessions are active than the cache
  // holds (TOKEN_CACHE_SIZE).
  const [row] = await sql.rows<{ expires_at: number; revoked_at: number | null }>(SESSION_LIVENESS, [
    sessionId,
  ]);
  return row !== undefined && row.revoked_at === null && row.expires_at > clock.now();
}
