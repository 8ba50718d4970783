import type { Kysely, Transaction } from 'kysely';
import { atMostEvery, type Clock } from '../base/clock.js';
import type { Database } from '../store/schema.js';

type Db = Kysely<Database> | Transaction<Database>;

/** How long what has ended is kept before it is deleted: for diagnosis, and for clocks a little apart. */
const KEPT_AFTER_END_MS = 3600_000;

/**
 * Deletes what can no longer be used, an hour after it ended, so that the store grows with what is in use and not with
 * everything ever issued (docs/deployment.md#what-the-database-keeps):
 * - authorization codes past their life, and pending connections whose code expired unexchanged;
 * - refresh tokens past their life (rotated tokens of a family are deleted by the rotation that no longer needs them,
 *   domain/refresh-tokens.ts);
 * - sessions past their life, revoked ones included: a session's liveness reads a missing row as ended, so its tokens
 *   stay refused. Before this, every sign-in left a row for good (a script that signs in on every run: one a run).
 * Connections that ended and the audit events stay: the History page tells them.
 */
export async function pruneExpired(db: Db, clock: Clock, batches = SESSION_BATCHES): Promise<void> {
  const cutoff = clock.now() - KEPT_AFTER_END_MS;
  await db.deleteFrom('authorization_codes').where('expires_at', '<', cutoff).execute();
  // An expired token can no longer be used nor meaningfully reused, so it goes. Rotated tokens without a family that
  // have not expired stay, because presenting one again is how their reuse is detected (docs/contract.md#tokens).
  await db.deleteFrom('refresh_tokens').where('expires_at', '<', cutoff).execute();
  const abandoned = db.deleteFrom('connections').where('status', '=', 'pending');
  await abandoned.where('expires_at', '<', cutoff).execute();
  // In batches, the event loop let go between them, and at most `batches.most` a run: the first run after an upgrade
  // meets every session ever made, and one delete of them all would hold the write lock (the embedded database's, and
  // so the event loop) for as long. A backlog beyond that goes in the next runs.
  for (let batch = 0; batch < batches.most; batch++) {
    const ended = db.selectFrom('sessions').select('id').where('expires_at', '<', cutoff).limit(batches.size);
    const r = await db.deleteFrom('sessions').where('id', 'in', ended).executeTakeFirst();
    if (Number(r.numDeletedRows) < batches.size) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * How ended sessions are deleted: `size` a statement, at most `most` statements a run (100,000 an hour). Measured on
 * the embedded database with 100,000 ended and 100,000 live sessions: 9–11 ms a batch of 5,000, its sync included.
 */
export const SESSION_BATCHES = { size: 5_000, most: 20 };

const PRUNE_INTERVAL_MS = 3600_000;
/** Whether each store (each instance; several may share a process) is due to prune, on the monotonic clock. */
const pruneDue = new WeakMap<Db, () => boolean>();

/**
 * `pruneExpired`, at most once an hour per instance: cheap enough to call from the paths that create what it deletes
 * (authorization, refresh, sign-in). Refresh tokens and sessions, the large tables, are found by their expiry index;
 * the codes' table holds about an hour's codes.
 */
export async function pruneExpiredHourly(db: Db, clock: Clock): Promise<void> {
  let due = pruneDue.get(db);
  if (!due) pruneDue.set(db, (due = atMostEvery(PRUNE_INTERVAL_MS, clock)));
  if (!due()) return;
  await pruneExpired(db, clock);
}
