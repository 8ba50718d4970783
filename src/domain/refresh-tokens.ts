import type { Kysely } from 'kysely';
import type { PostgresPrepared, PreparedSql, SyncSql } from '../store/prepared.js';
import type { Database } from '../store/schema.js';
import { CONNECTION_TTL_MS } from './connections.js';
import { SCOPES } from './scopes.js';

/**
 * Refresh tokens as stored (docs/contract.md#tokens): one row per token, keyed by its SHA-256, rotated on every use
 * (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2). The statements of the refresh grant run on every rotation, so they are
 * prepared statements (store/prepared.ts) rather than built queries.
 *
 * Families: the tokens of one authorization share a family tag (auth/refresh-token.ts puts it in the token; rows keep
 * its hash). Of a family's rotated tokens only the immediately previous one is needed whole: within the reuse window
 * a retry with it gets its successor again (its salt, its successor's row). Any older one presented again is reuse,
 * and the family alone says which connection to end. So the rotation that makes a token older than the immediately
 * previous one deletes its row, in the same atomic write: a family keeps two rows however often and however long it
 * rotates. Rows without a family (tokens issued before families) are kept until they expire, as detection needs them.
 */

type Db = Kysely<Database>;

/** A refresh token with the connection it belongs to, as the refresh grant reads it. */
export interface RefreshGrant {
  hash: string;
  parent_hash: string | null;
  successor_salt: string;
  scope: string;
  rotated_at: number | null;
  expires_at: number;
  family: string | null;
  id: string;
  user_id: string;
  client_id: string;
  resource: string;
  agency_id: string | null;
  member_id: string | null;
  status: 'pending' | 'active' | 'revoked';
  connection_scopes: string;
  connection_expires_at: number;
}

/** A RefreshGrant's columns: the token's row `rt` with its connection's `c`. */
const GRANT_COLUMNS = `rt.hash, rt.parent_hash, rt.successor_salt, rt.scope, rt.rotated_at, rt.expires_at, rt.family,
  c.id, c.user_id, c.client_id, c.resource, c.agency_id, c.member_id, c.status, c.scopes AS connection_scopes,
  c.expires_at AS connection_expires_at`;
/** SQLite, which plans without statistics, reads the token by its key, then its connection by its key. */
const SELECT_GRANT = `SELECT ${GRANT_COLUMNS} FROM refresh_tokens rt JOIN connections c ON c.id = rt.connection_id`;
/**
 * PostgreSQL: the connection is read from the token's row, in a lateral subquery that the planner cannot flatten, so
 * that the token comes first, looked up on its key. As a join, a plan made when connections were few started from them
 * and read each one's tokens through `refresh_tokens_connection_id`, every dead entry since the last vacuum included.
 */
const PG_SELECT_GRANT = `SELECT ${GRANT_COLUMNS} FROM refresh_tokens rt
  CROSS JOIN LATERAL (SELECT * FROM connections c WHERE c.id = rt.connection_id OFFSET 0) c`;
const FIND_GRANT = `${SELECT_GRANT} WHERE rt.hash = $1`;
const PG_FIND_GRANT = `${PG_SELECT_GRANT} WHERE rt.hash = $1`;

export async function findRefreshGrant(sql: PreparedSql, hash: string): Promise<RefreshGrant | undefined> {
  return (await sql.rows<RefreshGrant>(sql.engine === 'sqlite' ? FIND_GRANT : PG_FIND_GRANT, [hash]))[0];
}

/** The connection a family belongs to, for a token of it whose row is gone (pruned after rotation). */
export interface FamilyConnection {
  id: string;
  client_id: string;
  status: 'pending' | 'active' | 'revoked';
  expires_at: number;
}

const FIND_FAMILY = `SELECT c.id, c.client_id, c.status, c.expires_at
  FROM refresh_tokens rt JOIN connections c ON c.id = rt.connection_id WHERE rt.family = $1 LIMIT 1`;

export async function findFamilyConnection(
  sql: PreparedSql,
  family: string,
): Promise<FamilyConnection | undefined> {
  return (await sql.rows<FamilyConnection>(FIND_FAMILY, [family]))[0];
}

export interface NewRefreshToken {
  hash: string;
  connectionId: string;
  parentHash: string | null;
  salt: string;
  scope: string;
  family: string | null;
  now: number;
}

/** Stores the first token of a family (the code exchange). */
export async function storeRefreshToken(db: Db, t: NewRefreshToken): Promise<void> {
  await db
    .insertInto('refresh_tokens')
    .values({
      hash: t.hash,
      connection_id: t.connectionId,
      parent_hash: t.parentHash,
      successor_salt: t.salt,
      scope: t.scope,
      issued_at: t.now,
      rotated_at: null,
      expires_at: t.now + CONNECTION_TTL_MS,
      family: t.family,
    })
    .execute();
}

/** One rotation: the presented token consumed, its successor stored, the connection's expiry slid. */
export interface Rotation {
  /** The presented token's hash. */
  hash: string;
  /**
   * The salt its successor is derived with (auth/refresh-token.ts), chosen by this rotation and stored on the consumed
   * row, where a retry within the reuse window finds it. So the whole rotation is known before the row is read.
   */
  salt: string;
  successor: {
    hash: string;
    family: string | null;
    /** The salt stored with the successor's row until it is consumed (servers of earlier versions derive with it). */
    salt: string;
  };
  now: number;
}

/**
 * The checks of the refresh grant that PostgreSQL makes in the rotation's own statement (ROTATE_GUARDED), so that a
 * rotation is one round trip: the token issued to `clientId`, its connection active and unexpired, the token itself
 * unexpired and not yet rotated, a scope left once narrowed to the connection's with offline_access still in it, and
 * the canonical `resource`, when the request names one, equal to the grant's. Each is the grant's own check made no
 * looser (a resource stored in another form is only refused here, and then the grant decides on the row): whatever the
 * statement writes, the grant's checks of the same row allow.
 */
export interface RotationGuard {
  clientId: string;
  resource: string | null;
}

// Single use by compare-and-set (`rotated_at IS NULL`): of concurrent rotations of one token exactly one changes the
// row. Only `rotated_at` and the salt, which no index holds, change (on PostgreSQL the row is then updated in place:
// HOT).
const CONSUME =
  'UPDATE refresh_tokens SET rotated_at = $1, successor_salt = $2 WHERE hash = $3 AND rotated_at IS NULL';
const INSERT_SUCCESSOR = `INSERT INTO refresh_tokens
  (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at, expires_at, family)
  VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8)`;
const SLIDE = `UPDATE connections SET expires_at = $1, last_used_at = $2 WHERE id = $3 AND status = 'active'`;
/**
 * The grandparent of the new token, when it is of the consumed token's family (see above; a family only ever starts,
 * so a grandparent without one is a token from before families, and kept). SQLite, which plans without statistics,
 * reads it by its key; PostgreSQL's statements below compare the family through `coalesce`, so that no plan reads it
 * from the family index (`PG_SAME_FAMILY`).
 */
const PRUNE_GRANDPARENT = 'DELETE FROM refresh_tokens WHERE hash = $1 AND family = $2';

/**
 * PostgreSQL: the row to prune is looked up by its key alone, and its family compared after, where no index can serve
 * it. The family's equality read from the family index walks every entry of the family since the table was last
 * vacuumed, the dead ones included: a generic plan made on a table analyzed with few live tokens and many dead ones (a
 * small deployment, or any table between two vacuums) did, for both `family = x` and, before lever 35, `family IS NOT
 * NULL`. A family is a hash, never empty, so `coalesce` keeps a grandparent without one.
 */
const PG_SAME_FAMILY = (row: string, family: string) => `coalesce(${row}.family, '') = ${family}`;

/**
 * PostgreSQL: the read and the writes as one statement (data-modifying CTEs see one snapshot and commit together), one
 * round trip where a transaction takes seven (BEGIN, the read, four writes, COMMIT). `presented` is the row as the
 * snapshot has it; the compare-and-set is made on the row as it is: a concurrent rotation of the same token waits on
 * the row lock, then finds `rotated_at` set and consumes nothing, so it also stores and deletes nothing. `guard` is
 * added to the compare-and-set, on the row `presented` read where the row as it is cannot differ (a token's expiry
 * never changes), so that the update's plan has nothing but the key to read the token by. Every row is looked up by
 * its key (`$2`, or a scalar subquery of the one row consumed), never through a join, and no condition on
 * `refresh_tokens` but its key can be served by an index: whatever the statistics when PostgreSQL made the plan it
 * keeps for the named statement, the plan reads the table by its primary key or, while the table is believed tiny,
 * scans it (joined on `presented`, the token's row was once planned as a scan of a table that was not).
 */
const rotateStatement = (guard: string) => `WITH presented AS (
    ${PG_SELECT_GRANT} WHERE rt.hash = $2::text
  ), consumed AS (
    UPDATE refresh_tokens rt SET rotated_at = $1::bigint, successor_salt = $3::text
    FROM presented p WHERE rt.hash = $2::text AND rt.rotated_at IS NULL${guard}
    RETURNING rt.connection_id, rt.parent_hash, rt.scope, rt.family
  ), successor AS (
    INSERT INTO refresh_tokens
      (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at, expires_at, family)
    SELECT $4::text, connection_id, $2::text, $5::text, scope, $1::bigint, NULL, $6::bigint, $7::text
    FROM consumed
  ), slid AS (
    UPDATE connections SET expires_at = $6::bigint, last_used_at = $1::bigint
    WHERE id = (SELECT connection_id FROM consumed) AND status = 'active'
  ), pruned AS (
    DELETE FROM refresh_tokens d WHERE d.hash = (SELECT parent_hash FROM consumed)
      AND ${PG_SAME_FAMILY('d', '(SELECT family FROM consumed)')}
  )
  SELECT presented.*, (SELECT count(*) FROM consumed)::int AS won FROM presented`;

/** The connection of the presented row `p` still grants offline_access, in its token's scope and its own. */
const STILL_OFFLINE = (p: string) => `'${SCOPES.offline}' = ANY (string_to_array(${p}.scope, ' '))
      AND '${SCOPES.offline}' = ANY (string_to_array(${p}.connection_scopes, ' '))`;

/** After the grant's checks, in JavaScript, on a row read before. */
const ROTATE = rotateStatement('');
/** RotationGuard, in SQL: `parseList` is `array_remove(string_to_array(…, ' '), '')`. */
const ROTATE_GUARDED = rotateStatement(`
      AND p.expires_at > $1::bigint AND p.client_id = $8::text
      AND p.status = 'active' AND p.connection_expires_at > $1::bigint
      AND ($9::text IS NULL OR p.resource = $9::text)
      AND array_remove(string_to_array(p.scope, ' '), '') && string_to_array(p.connection_scopes, ' ')
      AND ${STILL_OFFLINE('p')}`);

/**
 * ROTATE_GUARDED for many rotations at once (lever 37): the rotations that wait share one statement, one round trip
 * and one commit (store/coalesce.ts). Element i of each array is rotation i; every rotation is checked, consumed and
 * answered as by ROTATE_GUARDED alone, with its own `now` and guard. Two rotations of one connection in a group slide
 * it once, to the later of their expiries.
 *
 * Each token is looked up by its key, one lookup per rotation (a lateral subquery that the planner cannot flatten, on
 * the hash alone); the consuming update joins the token's row on its key and nothing else (its expiry is compared on
 * the row `presented` read: a token's expiry never changes); the grandparent is joined on its key, its family compared
 * where no index serves it (`PG_SAME_FAMILY`). So no plan reads `refresh_tokens` through a secondary index, and a scan
 * is left to a table believed tiny (a nested loop on the key is still the planner's choice by cost). Read as `hash =
 * ANY` of the group's hashes, the generic plan a connection keeps followed the statistics (lever 40): with few live
 * tokens and many dead ones, as a table holds between two vacuums, it read each connection's tokens through
 * `refresh_tokens_connection_id` and the unexpired ones through `refresh_tokens_expires_at`, dead entries included; on
 * a small table never analyzed it chose a scan, and kept it while the table grew. At 20 chains its cost grew with
 * every rotation since the last vacuum: 378 → 997 CPU µs per rotation over a minute, the service's process and its
 * backends together. The connections the group slides are updated by `= ANY` of the keys the consumed rows name.
 */
const ROTATE_GUARDED_MANY = `WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[],
      $8::text[], $9::text[])
      AS r(now, hash, salt, successor_hash, successor_salt, successor_expires_at, successor_family, client_id, resource)
  ), presented AS (
    SELECT g.* FROM unnest($2::text[]) AS k(hash)
    CROSS JOIN LATERAL (${PG_SELECT_GRANT} WHERE rt.hash = k.hash OFFSET 0) g
  ), consumed AS (
    UPDATE refresh_tokens rt SET rotated_at = r.now, successor_salt = r.salt
    FROM r JOIN presented p ON p.hash = r.hash
    WHERE rt.hash = p.hash AND rt.rotated_at IS NULL
      AND p.expires_at > r.now AND p.client_id = r.client_id
      AND p.status = 'active' AND p.connection_expires_at > r.now
      AND (r.resource IS NULL OR p.resource = r.resource)
      AND array_remove(string_to_array(p.scope, ' '), '') && string_to_array(p.connection_scopes, ' ')
      AND ${STILL_OFFLINE('p')}
    RETURNING rt.hash, rt.connection_id, rt.parent_hash, rt.scope, rt.family, r.now, r.successor_hash,
      r.successor_salt, r.successor_expires_at, r.successor_family
  ), successor AS (
    INSERT INTO refresh_tokens
      (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at, expires_at, family)
    SELECT successor_hash, connection_id, hash, successor_salt, scope, now, NULL, successor_expires_at,
      successor_family
    FROM consumed
  ), slid AS (
    UPDATE connections c
    SET expires_at = (SELECT max(successor_expires_at) FROM consumed WHERE connection_id = c.id),
      last_used_at = (SELECT max(now) FROM consumed WHERE connection_id = c.id)
    WHERE c.id = ANY (ARRAY(SELECT connection_id FROM consumed)) AND c.status = 'active'
  ), pruned AS (
    DELETE FROM refresh_tokens d USING consumed gone
    WHERE d.hash = gone.parent_hash AND ${PG_SAME_FAMILY('d', 'gone.family')}
  )
  SELECT presented.*, EXISTS (SELECT 1 FROM consumed WHERE consumed.hash = presented.hash)::int AS won
  FROM presented`;

/**
 * Rotation statements of one process in flight at once. One group runs while the next forms; a second is allowed so
 * that a group waiting on a row lock (another instance rotating the same token, a disconnect under way) does not hold
 * every other rotation of the process behind it. Measured at 20 chains (lever 37): one in flight 328.5 CPU µs per
 * rotation, two 397.3, as many as the pool's connections (each rotation then mostly alone) 577–642.
 */
const ROTATION_STATEMENTS_IN_FLIGHT = 2;
/** At most this many rotations in one statement. */
const MAX_ROTATIONS_PER_STATEMENT = 32;

/** The statements of a rotation by engine, for the tests that hold their plans to reads by key. */
export const ROTATION_STATEMENTS = {
  sqlite: { FIND_GRANT, CONSUME, INSERT_SUCCESSOR, SLIDE, PRUNE_GRANDPARENT },
  postgres: { FIND_GRANT: PG_FIND_GRANT, ROTATE, ROTATE_GUARDED, ROTATE_GUARDED_MANY },
} as const;

type RotatedGrant = RefreshGrant & { won: number };

interface GuardedRotation {
  rotation: Rotation;
  guard: RotationGuard;
}

const guardedRotations = new WeakMap<
  PostgresPrepared,
  (r: GuardedRotation) => Promise<RotatedGrant | undefined>
>();

/** ROTATE_GUARDED for one rotation: alone, or in one statement with the others waiting at the same time. */
function rotateGuarded(sql: PostgresPrepared, r: GuardedRotation): Promise<RotatedGrant | undefined> {
  let run = guardedRotations.get(sql);
  if (!run) {
    run = sql.shared<GuardedRotation, RotatedGrant | undefined>({
      concurrency: ROTATION_STATEMENTS_IN_FLIGHT,
      maxItems: MAX_ROTATIONS_PER_STATEMENT,
      key: ({ rotation }) => rotation.hash,
      one: async (item) => (await sql.rows<RotatedGrant>(ROTATE_GUARDED, guardedParams(item)))[0],
      many: async (items) => {
        const rows = await sql.rows<RotatedGrant>(ROTATE_GUARDED_MANY, manyRotationParams(items));
        const byHash = new Map(rows.map((row) => [row.hash, row]));
        return items.map(({ rotation }) => byHash.get(rotation.hash));
      },
    });
    guardedRotations.set(sql, run);
  }
  return run(r);
}

/** ROTATE_GUARDED's parameters. */
const guardedParams = ({ rotation, guard }: GuardedRotation) => [
  ...rotationParams(rotation),
  guard.clientId,
  guard.resource,
];

/** ROTATE_GUARDED_MANY's: the same, as one array per parameter, element i of each from rotation i. */
function manyRotationParams(items: readonly GuardedRotation[]): unknown[][] {
  const rows = items.map(guardedParams);
  return rows[0]!.map((_, column) => rows.map((row) => row[column]));
}

/** What the refresh grant makes of a token's row: whether to rotate it, and what to answer. */
export interface RotationPlan<T> {
  rotate: boolean;
  answer: T;
}

/**
 * Reads the grant of the presented token and makes `rotation` of it if `plan` says so. `plan` is synchronous; when it
 * throws, nothing is written. `won` is false when no rotation was planned, or when another rotation consumed the token
 * first; the answer is then the plan of the row as it is after that rotation (the caller treats it as reuse).
 *
 * On the embedded database the read, the plan and the writes are one unit of the group commit: the read inside the
 * commit's transaction cost 2–4 µs, against 17–21 µs as a transaction of its own before (store/prepared.ts). On
 * PostgreSQL, with a `guard`, one statement that reads, checks and writes (shared with the rotations waiting at the
 * same time: ROTATE_GUARDED_MANY); without one (the request asks for what only the plan checks), or when the guarded
 * statement wrote nothing where the plan would rotate, a read, then the compare-and-set.
 */
export async function findAndRotate<T>(
  sql: PreparedSql,
  rotation: Rotation,
  guard: RotationGuard | undefined,
  plan: (row: RefreshGrant | undefined) => RotationPlan<T>,
): Promise<{ answer: T; won: boolean }> {
  if (sql.engine === 'sqlite') {
    return sql.atomically((tx) => {
      const row = tx.rows<RefreshGrant>(FIND_GRANT, [rotation.hash])[0];
      const { rotate, answer } = plan(row);
      return { answer, won: rotate && row !== undefined && rotateInTransaction(tx, rotation, row) };
    });
  }
  if (guard) {
    const row = await rotateGuarded(sql, { rotation, guard });
    const won = row?.won === 1;
    let planned: RotationPlan<T>;
    try {
      planned = plan(row);
    } catch (error) {
      if (won) throw new GuardMismatch(error);
      throw error;
    }
    if (won && !planned.rotate) throw new GuardMismatch(undefined);
    if (won || !planned.rotate) return { answer: planned.answer, won };
    // Planned but not written: another rotation won, or the guard was stricter than the plan. The row decides.
  }
  const { rotate, answer } = plan(await findRefreshGrant(sql, rotation.hash));
  if (!rotate) return { answer, won: false };
  const [row] = await sql.rows<{ won: number }>(ROTATE, rotationParams(rotation));
  if (row?.won === 1) return { answer, won: true };
  // Another rotation consumed it between the read and the write: its row, as that rotation left it, says what to answer.
  return { answer: plan(await findRefreshGrant(sql, rotation.hash)).answer, won: false };
}

/**
 * The guarded statement rotated a token the grant's checks refuse: RotationGuard is looser than the grant somewhere.
 * A bug, answered and logged as one (the token is consumed; nothing else was given out).
 */
class GuardMismatch extends Error {
  constructor(cause: unknown) {
    super('The rotation statement consumed a refresh token that the refresh grant refuses', { cause });
  }
}

const rotationParams = (r: Rotation) => [
  r.now,
  r.hash,
  r.salt,
  r.successor.hash,
  r.successor.salt,
  r.now + CONNECTION_TTL_MS,
  r.successor.family,
];

function rotateInTransaction(tx: SyncSql, r: Rotation, row: RefreshGrant): boolean {
  const s = r.successor;
  const expiresAt = r.now + CONNECTION_TTL_MS;
  if (tx.changes(CONSUME, [r.now, r.salt, r.hash]) !== 1) return false;
  tx.changes(INSERT_SUCCESSOR, [s.hash, row.id, r.hash, s.salt, row.scope, r.now, expiresAt, s.family]);
  tx.changes(SLIDE, [expiresAt, r.now, row.id]);
  if (row.parent_hash !== null && row.family !== null)
    tx.changes(PRUNE_GRANDPARENT, [row.parent_hash, row.family]);
  return true;
}

/** The stored successor of a token (hash and parent), for the answer to a retry within the reuse window. */
export function findSuccessor(db: Db, successorHash: string, parentHash: string) {
  return db
    .selectFrom('refresh_tokens')
    .select(['scope', 'rotated_at'])
    .where('hash', '=', successorHash)
    .where('parent_hash', '=', parentHash)
    .executeTakeFirst();
}
