import type { Kysely } from 'kysely';
import type { PreparedSql, SyncSql } from '../store/prepared.js';
import type { Database } from '../store/schema.js';
import { CONNECTION_TTL_MS } from './connections.js';

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

const FIND_GRANT = `SELECT rt.hash, rt.parent_hash, rt.successor_salt, rt.scope, rt.rotated_at, rt.expires_at, rt.family,
  c.id, c.user_id, c.client_id, c.resource, c.agency_id, c.member_id, c.status, c.scopes AS connection_scopes,
  c.expires_at AS connection_expires_at
  FROM refresh_tokens rt JOIN connections c ON c.id = rt.connection_id WHERE rt.hash = $1`;

export async function findRefreshGrant(sql: PreparedSql, hash: string): Promise<RefreshGrant | undefined> {
  return (await sql.rows<RefreshGrant>(FIND_GRANT, [hash]))[0];
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
  /** Its parent's: the row that this rotation makes older than the immediately previous token. */
  parentHash: string | null;
  connectionId: string;
  successor: Omit<NewRefreshToken, 'connectionId' | 'parentHash' | 'now'>;
  now: number;
}

// Single use by compare-and-set (`rotated_at IS NULL`): of concurrent rotations of one token exactly one changes the
// row. Only `rotated_at`, which no index holds, changes (on PostgreSQL, in ROTATE_POSTGRES below, the row is then
// updated in place: HOT).
const CONSUME = 'UPDATE refresh_tokens SET rotated_at = $1 WHERE hash = $2 AND rotated_at IS NULL';
const INSERT_SUCCESSOR = `INSERT INTO refresh_tokens
  (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at, expires_at, family)
  VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8)`;
const SLIDE = `UPDATE connections SET expires_at = $1, last_used_at = $2 WHERE id = $3 AND status = 'active'`;
/** The grandparent of the new token, when it belongs to a family (see above). */
const PRUNE_GRANDPARENT = 'DELETE FROM refresh_tokens WHERE hash = $1 AND family IS NOT NULL';

// PostgreSQL: the same writes as one statement (data-modifying CTEs see one snapshot and commit together), one round
// trip instead of six with BEGIN and COMMIT. A concurrent rotation of the same token waits on the row lock, then
// finds `rotated_at` set and consumes nothing, so it also stores and deletes nothing.
const ROTATE_POSTGRES = `WITH consumed AS (
    UPDATE refresh_tokens SET rotated_at = $1::bigint WHERE hash = $2::text AND rotated_at IS NULL
    RETURNING connection_id
  ), successor AS (
    INSERT INTO refresh_tokens
      (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at, expires_at, family)
    SELECT $3::text, connection_id, $2::text, $4::text, $5::text, $1::bigint, NULL, $6::bigint, $7::text
    FROM consumed
  ), slid AS (
    UPDATE connections SET expires_at = $6::bigint, last_used_at = $1::bigint
    WHERE id IN (SELECT connection_id FROM consumed) AND status = 'active'
  ), pruned AS (
    DELETE FROM refresh_tokens WHERE hash = $8::text AND family IS NOT NULL AND EXISTS (SELECT 1 FROM consumed)
  )
  SELECT count(*)::int AS won FROM consumed`;

/** What the refresh grant makes of a token's row: the rotation to attempt, if any, and what to answer. */
export interface RotationPlan<T> {
  rotation?: Rotation;
  answer: T;
}

/**
 * Reads the grant of the token whose hash is `hash` and attempts the rotation `plan` makes of it. `plan` is
 * synchronous; when it throws, nothing is written. `won` is false when no rotation was planned, or when another
 * rotation consumed the token first (the caller treats that as reuse).
 *
 * On the embedded database the read, the plan and the writes are one unit of the group commit: the read inside the
 * commit's transaction cost 2–4 µs, against 17–21 µs as a transaction of its own before (store/prepared.ts). On
 * PostgreSQL, a read, then one compare-and-set statement.
 */
export async function findAndRotate<T>(
  sql: PreparedSql,
  hash: string,
  plan: (row: RefreshGrant | undefined) => RotationPlan<T>,
): Promise<{ answer: T; won: boolean }> {
  if (sql.engine === 'postgres') {
    const { rotation, answer } = plan(await findRefreshGrant(sql, hash));
    return { answer, won: rotation ? await rotateOnPostgres(sql, rotation) : false };
  }
  return sql.atomically((tx) => {
    const { rotation, answer } = plan(tx.rows<RefreshGrant>(FIND_GRANT, [hash])[0]);
    return { answer, won: rotation ? rotateInTransaction(tx, rotation) : false };
  });
}

async function rotateOnPostgres(sql: PreparedSql, r: Rotation): Promise<boolean> {
  const s = r.successor;
  const params = [r.now, r.hash, s.hash, s.salt, s.scope, r.now + CONNECTION_TTL_MS, s.family, r.parentHash];
  const [row] = await sql.rows<{ won: number }>(ROTATE_POSTGRES, params);
  return row?.won === 1;
}

function rotateInTransaction(tx: SyncSql, r: Rotation): boolean {
  const s = r.successor;
  const expiresAt = r.now + CONNECTION_TTL_MS;
  if (tx.changes(CONSUME, [r.now, r.hash]) !== 1) return false;
  tx.changes(INSERT_SUCCESSOR, [s.hash, r.connectionId, r.hash, s.salt, s.scope, r.now, expiresAt, s.family]);
  tx.changes(SLIDE, [expiresAt, r.now, r.connectionId]);
  if (r.parentHash !== null) tx.changes(PRUNE_GRANDPARENT, [r.parentHash]);
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
