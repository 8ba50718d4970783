import type { ExpressionBuilder, Kysely, Transaction } from 'kysely';
import type { PreparedSql } from '../store/prepared.js';
import type { ConnectionsTable, Database, MembersTable } from '../store/schema.js';
import { audit, type AuditType } from './audit.js';
import type { Clock } from '../base/clock.js';
import { newId } from '../base/ids.js';
import type { Metrics } from '../base/metrics.js';
import { narrowCeiling, parseList, type Role } from './permissions.js';

/**
 * Connections: THE grant (docs/contract.md#connections). Disconnect, narrowing and member removal are single updates of this row, and
 * every token check that matters reads it (refresh, liveness of access tokens, the token exchange).
 */
export type ConnectionRow = ConnectionsTable;

/** docs/contract.md#limits: refresh tokens (and so the grant) live 30 days, sliding. */
export const CONNECTION_TTL_MS = 30 * 24 * 3600 * 1000;

export const REVOKE_REASONS = [
  'disconnected',
  'revoked_by_client',
  'refresh_reuse',
  'code_replay',
  'member_removed',
  /** Folded into the newer connection of the same app (migration 0004). */
  'merged',
  /** Ended by the service's operator with the user's every session (`svc users sign-out`, `users set-password`). */
  'ended_by_operator',
  /** Ended by the service's operator with every connection of the application (`svc clients disconnect`). */
  'client_ended_by_operator',
] as const;
export type RevokeReason = (typeof REVOKE_REASONS)[number];

type Db = Kysely<Database> | Transaction<Database>;

export interface NewConnection {
  userId: string;
  agencyId: string | null;
  memberId: string | null;
  clientId: string;
  resource: string;
  scopes: string[];
  ceiling: string[];
  /** Until the code is exchanged the connection is pending and dies with the code. */
  pendingUntil: number;
}

export async function createPendingConnection(
  db: Db,
  clock: Clock,
  c: NewConnection,
): Promise<ConnectionRow> {
  const row: ConnectionRow = {
    id: newId('con'),
    user_id: c.userId,
    agency_id: c.agencyId,
    member_id: c.memberId,
    client_id: c.clientId,
    resource: c.resource,
    scopes: c.scopes.join(' '),
    ceiling: c.ceiling.join(' '),
    status: 'pending',
    created_at: clock.now(),
    last_used_at: null,
    expires_at: c.pendingUntil,
    revoked_at: null,
    revoke_reason: null,
  };
  await db.insertInto('connections').values(row).execute();
  return row;
}

/**
 * The first exchange of a code: the consent it carries takes effect. One connection per app (member, agency, client,
 * resource; docs/contract.md#connections): when the app is already connected, that connection takes the newest consent
 * (scopes and ceiling) and the pending row is folded into it, so re-authorizing (a step-up, a reconnect, a second
 * device) never leaves an earlier grant orphaned, and each device's refresh tokens are one token family under it.
 * The history records either ("connected", or "updated … access"). Returns the id of the connection the tokens belong
 * to, or undefined when the pending row was revoked meanwhile.
 */
export async function activateGrant(db: Db, clock: Clock, pendingId: string): Promise<string | undefined> {
  const now = clock.now();
  const pending = await db
    .selectFrom('connections')
    .leftJoin('members', 'members.id', 'connections.member_id')
    .selectAll('connections')
    .select('members.status as member_status')
    .where('connections.id', '=', pendingId)
    .where('connections.status', '=', 'pending')
    .executeTakeFirst();
  if (!pending) return undefined;
  // A consent written while its member was being removed: the removal ended the member's connections before this one
  // existed, so it must not become one now (it would hold refresh tokens, and read as a connection in the history).
  if (pending.member_id !== null && pending.member_status !== 'active') {
    await revokeConnection(db, clock, pendingId, 'member_removed');
    return undefined;
  }
  const existing = await findActiveConnectionOfApp(db, pending);
  if (!existing) {
    const r = await db
      .updateTable('connections')
      .set({ status: 'active', last_used_at: now, expires_at: now + CONNECTION_TTL_MS })
      .where('id', '=', pendingId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    if (r.numUpdatedRows !== 1n) return undefined;
    await auditConsent(db, clock, pending, pendingId, false);
    return pendingId;
  }
  await db
    .updateTable('connections')
    .set({
      scopes: pending.scopes,
      ceiling: pending.ceiling,
      last_used_at: now,
      expires_at: now + CONNECTION_TTL_MS,
    })
    .where('id', '=', existing.id)
    .execute();
  await db
    .updateTable('authorization_codes')
    .set({ connection_id: existing.id })
    .where('connection_id', '=', pendingId)
    .execute();
  await db.deleteFrom('connections').where('id', '=', pendingId).execute();
  await auditConsent(db, clock, pending, existing.id, true);
  return existing.id;
}

/** The history's record of a consent taking effect: a new connection, or (`update`) a re-authorization folded in. */
function auditConsent(db: Db, clock: Clock, consent: ConnectionRow, connectionId: string, update: boolean) {
  return audit(db, clock, {
    type: 'connection.created',
    agencyId: consent.agency_id,
    memberId: consent.member_id,
    connectionId,
    actorUserId: consent.user_id,
    detail: {
      client_id: consent.client_id,
      scopes: parseList(consent.scopes),
      ceiling: parseList(consent.ceiling),
      ...(update ? { update: true } : {}),
    },
  });
}

/** The active connection of the same app for the same member (or user, for user-level resources), if any. */
export function findActiveConnectionOfApp(
  db: Db,
  c: Pick<ConnectionRow, 'user_id' | 'agency_id' | 'client_id' | 'resource'>,
): Promise<ConnectionRow | undefined> {
  let q = db
    .selectFrom('connections')
    .selectAll()
    .where('user_id', '=', c.user_id)
    .where('client_id', '=', c.client_id)
    .where('resource', '=', c.resource)
    .where('status', '=', 'active');
  q = c.agency_id === null ? q.where('agency_id', 'is', null) : q.where('agency_id', '=', c.agency_id);
  return q.executeTakeFirst();
}

/** Whether a database error is a unique-constraint violation (two first exchanges of one app racing). */
export function isUniqueViolation(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

const ENDING_EVENT: Partial<Record<RevokeReason, AuditType>> = {
  refresh_reuse: 'connection.refresh_reuse_detected',
  code_replay: 'connection.code_replay_detected',
};

/**
 * Ends a connection (idempotent, compare-and-set on its status). Returns true, and writes the audit event, only when
 * this call ended an active connection: a pending one (a consent whose code is still unexchanged) is ended silently,
 * since it never was a connection the member could see.
 */
export async function revokeConnection(
  db: Db,
  clock: Clock,
  id: string,
  reason: RevokeReason,
  actorUserId: string | null = null,
): Promise<boolean> {
  const row = await db.selectFrom('connections').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row || row.status === 'revoked') return false;
  const r = await db
    .updateTable('connections')
    .set({ status: 'revoked', revoked_at: clock.now(), revoke_reason: reason })
    .where('id', '=', id)
    .where('status', '=', row.status)
    .executeTakeFirst();
  if (r.numUpdatedRows !== 1n || row.status !== 'active') return false;
  // One event per ending; the two attacks have their own type, so the history names them (RFC 9700 §4.14, §4.5).
  await audit(db, clock, {
    type: ENDING_EVENT[reason] ?? 'connection.revoked',
    agencyId: row.agency_id,
    memberId: row.member_id,
    connectionId: id,
    actorUserId,
    detail: { reason, client_id: row.client_id },
  });
  return true;
}

/** What remembers "this connection is live" near the token checks: ending a connection must make it forget. */
export interface ConnectionLivenessMemory {
  forget(connectionId: string): void;
}

/**
 * Ends a connection and drops its cached liveness in this process, so this instance refuses its tokens at once
 * (other instances within the liveness bound). The one way to end a connection; false when it had already ended.
 */
export async function endConnection(
  deps: {
    db: Db;
    clock: Clock;
    connectionLiveness: ConnectionLivenessMemory;
    metrics: Pick<Metrics, 'connectionRevoked'>;
  },
  id: string,
  reason: RevokeReason,
  actorUserId: string | null = null,
): Promise<boolean> {
  const ended = await revokeConnection(deps.db, deps.clock, id, reason, actorUserId);
  deps.connectionLiveness.forget(id);
  if (ended) deps.metrics.connectionRevoked(reason);
  return ended;
}

const CONNECTION_LIVENESS = 'SELECT status, expires_at FROM connections WHERE id = $1';

/** Whether a token minted under this connection may still be used: active and not expired. */
export async function isConnectionLive(sql: PreparedSql, clock: Clock, id: string): Promise<boolean> {
  const [row] = await sql.rows<Pick<ConnectionRow, 'status' | 'expires_at'>>(CONNECTION_LIVENESS, [id]);
  return row !== undefined && row.status === 'active' && row.expires_at > clock.now();
}

/** `isConnectionLive`'s rule as a query condition: active and unexpired at `now`. */
const live = (now: number) => (eb: ExpressionBuilder<Database, 'connections'>) =>
  eb.and([eb('status', '=', 'active'), eb('expires_at', '>', now)]);

export function findConnection(db: Db, id: string): Promise<ConnectionRow | undefined> {
  return db.selectFrom('connections').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Every live connection of a user, in every agency (by member) and on the account (`agency_id` null), newest first:
 * active and unexpired, as `isConnectionLive` decides, so no page shows a connection whose tokens are refused.
 */
export function listLiveConnections(
  db: Kysely<Database>,
  userId: string,
  now: number,
): Promise<ConnectionRow[]> {
  return db
    .selectFrom('connections')
    .selectAll()
    .where('user_id', '=', userId)
    .where(live(now))
    .orderBy('created_at', 'desc')
    .execute();
}

/** docs/contract.md#revocation: a role change narrows every connection of the member to ceiling ∩ new role. Returns the ids narrowed. */
export async function narrowMemberConnections(
  db: Db,
  clock: Clock,
  memberId: string,
  role: Role,
  actorUserId: string | null,
): Promise<string[]> {
  const rows = await db
    .selectFrom('connections')
    .selectAll()
    .where('member_id', '=', memberId)
    .where('status', '!=', 'revoked')
    .execute();
  const narrowed: string[] = [];
  for (const row of rows) {
    const before = parseList(row.ceiling);
    const after = narrowCeiling(before, role);
    if (after.length === before.length) continue;
    // Compare-and-set on the ceiling: a concurrent change to the same row is not overwritten blindly.
    const r = await db
      .updateTable('connections')
      .set({ ceiling: after.join(' ') })
      .where('id', '=', row.id)
      .where('ceiling', '=', row.ceiling)
      .executeTakeFirst();
    if (r.numUpdatedRows !== 1n || row.status !== 'active') continue;
    narrowed.push(row.id);
    await audit(db, clock, {
      type: 'connection.narrowed',
      agencyId: row.agency_id,
      memberId,
      connectionId: row.id,
      actorUserId,
      detail: { removed: before.filter((p) => !after.includes(p as never)), role },
    });
  }
  return narrowed;
}

/** docs/contract.md#revocation: removing the member ends every connection of that member. Returns the ids ended. */
export function endMemberConnections(
  db: Db,
  clock: Clock,
  memberId: string,
  actorUserId: string | null,
): Promise<string[]> {
  return endConnectionsOf(db, clock, 'member_id', memberId, 'member_removed', actorUserId);
}

/**
 * Ends every connection of a user, in every agency and on the account, by the service's operator. Returns the ids of
 * the active ones it ended.
 */
export function endUserConnections(db: Db, clock: Clock, userId: string): Promise<string[]> {
  return endConnectionsOf(db, clock, 'user_id', userId, 'ended_by_operator', null);
}

/**
 * Ends every connection an application holds, for every member and user, by the service's operator (its tokens may
 * have been stolen from it, or it may act against its members). Returns the ids of the active ones it ended.
 */
export function endClientConnections(db: Db, clock: Clock, clientId: string): Promise<string[]> {
  return endConnectionsOf(db, clock, 'client_id', clientId, 'client_ended_by_operator', null);
}

/** What an application holds now: its live connections (as `isConnectionLive` decides), their users, its last use. */
export interface ClientHoldings {
  clientId: string;
  connections: number;
  users: number;
  lastUsedAt: number | null;
}

/**
 * The live connections of every application, by client (for `svc clients list`: which applications act for members
 * now, to find the one to disconnect). A read of the whole table, for a command an operator runs, not a request path.
 */
export async function liveConnectionsByClient(db: Db, now: number): Promise<ClientHoldings[]> {
  const rows = await db
    .selectFrom('connections')
    .select((eb) => [
      'client_id',
      eb.fn.countAll().as('connections'),
      eb.fn.count('user_id').distinct().as('users'),
      eb.fn.max('last_used_at').as('last_used_at'),
    ])
    .where(live(now))
    .groupBy('client_id')
    .execute();
  return rows.map((r) => ({
    clientId: r.client_id,
    connections: Number(r.connections),
    users: Number(r.users),
    lastUsedAt: r.last_used_at === null ? null : Number(r.last_used_at),
  }));
}

/**
 * Ends every connection of one member, user or application not yet ended, pending ones included (a consent whose code
 * is still unexchanged must not become a connection afterwards). Returns the ids of the active ones it ended.
 */
async function endConnectionsOf(
  db: Db,
  clock: Clock,
  owner: 'member_id' | 'user_id' | 'client_id',
  id: string,
  reason: RevokeReason,
  actorUserId: string | null,
): Promise<string[]> {
  const rows = await db
    .selectFrom('connections')
    .select('id')
    .where(owner, '=', id)
    .where('status', '!=', 'revoked')
    .execute();
  const ended: string[] = [];
  for (const row of rows) {
    if (await revokeConnection(db, clock, row.id, reason, actorUserId)) ended.push(row.id);
  }
  return ended;
}

/** A connection as it stands now, with its member's status and role and the agency's write setting. */
export interface CurrentGrant {
  status: ConnectionRow['status'];
  expires_at: number;
  ceiling: string;
  member_id: string;
  agency_id: string;
  member_status: MembersTable['status'];
  role: Role;
  agent_write_enabled: number;
}

const CURRENT_GRANT = `SELECT c.status, c.expires_at, c.ceiling, c.member_id, c.agency_id,
  m.status AS member_status, m.role, a.agent_write_enabled
  FROM connections c JOIN members m ON m.id = c.member_id JOIN agencies a ON a.id = c.agency_id
  WHERE c.id = $1`;

/**
 * The grant read from the database, never a cache, by every check that must see a disconnect, role change or
 * removal at once (docs/contract.md#connections): one prepared statement joining the three rows, since it runs on
 * every agency tool call (building it with Kysely cost more than running it).
 */
export async function currentGrant(
  sql: PreparedSql,
  connectionId: string,
): Promise<CurrentGrant | undefined> {
  return (await sql.rows<CurrentGrant>(CURRENT_GRANT, [connectionId]))[0];
}
