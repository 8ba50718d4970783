import type { Kysely, Transaction } from 'kysely';
import type { Engine, Store } from '../store/database.js';
import type { AgenciesTable, Database, MembersTable } from '../store/schema.js';
import { audit } from './audit.js';
import type { Clock } from '../base/clock.js';
import type { Metrics } from '../base/metrics.js';
import {
  type ConnectionLivenessMemory,
  endMemberConnections,
  narrowMemberConnections,
} from './connections.js';
import { newId } from '../base/ids.js';
import { type Role, roleAllows } from './permissions.js';

export type AgencyRow = AgenciesTable;
export type MemberRow = MembersTable;

export class MembershipError extends Error {
  override name = 'MembershipError';
}

export async function createAgency(
  db: Kysely<Database>,
  clock: Clock,
  o: { name: string; plan?: string; agentWriteEnabled?: boolean },
): Promise<AgencyRow> {
  const row: AgencyRow = {
    id: newId('agy'),
    name: o.name,
    plan: o.plan ?? 'studio',
    agent_write_enabled: o.agentWriteEnabled ? 1 : 0,
    created_at: clock.now(),
  };
  await db.insertInto('agencies').values(row).execute();
  return row;
}

export async function addMember(
  db: Kysely<Database>,
  clock: Clock,
  o: { agencyId: string; userId: string; role: Role },
): Promise<MemberRow> {
  const row: MemberRow = {
    id: newId('mem'),
    agency_id: o.agencyId,
    user_id: o.userId,
    role: o.role,
    status: 'active',
    created_at: clock.now(),
    removed_at: null,
  };
  await db.insertInto('members').values(row).execute();
  return row;
}

export function findAgency(db: Kysely<Database>, id: string): Promise<AgencyRow | undefined> {
  return db.selectFrom('agencies').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The active membership of a user in an agency, if any. */
export function activeMembership(
  db: Kysely<Database>,
  userId: string,
  agencyId: string,
): Promise<MemberRow | undefined> {
  return db
    .selectFrom('members')
    .selectAll()
    .where('user_id', '=', userId)
    .where('agency_id', '=', agencyId)
    .where('status', '=', 'active')
    .executeTakeFirst();
}

export interface MembershipView {
  member: MemberRow;
  agency: AgencyRow;
}

/** The agencies where the user is an active member, by name. */
export async function listMemberships(db: Kysely<Database>, userId: string): Promise<MembershipView[]> {
  const rows = await db
    .selectFrom('members')
    .innerJoin('agencies', 'agencies.id', 'members.agency_id')
    .select([
      'members.id as member_id',
      'members.role',
      'members.status',
      'members.created_at as member_created_at',
      'agencies.id as agency_id',
      'agencies.name',
      'agencies.plan',
      'agencies.agent_write_enabled',
      'agencies.created_at',
    ])
    .where('members.user_id', '=', userId)
    .where('members.status', '=', 'active')
    .orderBy('agencies.name')
    .execute();
  return rows.map((r) => ({
    member: {
      id: r.member_id,
      agency_id: r.agency_id,
      user_id: userId,
      role: r.role,
      status: r.status,
      created_at: r.member_created_at,
      removed_at: null,
    },
    agency: {
      id: r.agency_id,
      name: r.name,
      plan: r.plan,
      agent_write_enabled: r.agent_write_enabled,
      created_at: r.created_at,
    },
  }));
}

/** The agency a member (of any status) belongs to. */
export async function agencyOfMember(db: Kysely<Database>, memberId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('members')
    .select('agency_id')
    .where('id', '=', memberId)
    .executeTakeFirst();
  return row?.agency_id;
}

/** The active members of an agency with their usernames. */
export function listAgencyMembers(db: Kysely<Database>, agencyId: string) {
  return db
    .selectFrom('members')
    .innerJoin('users', 'users.id', 'members.user_id')
    .select(['members.id', 'members.role', 'members.user_id', 'users.username', 'members.created_at'])
    .where('members.agency_id', '=', agencyId)
    .where('members.status', '=', 'active')
    .orderBy('users.username')
    .execute();
}

/**
 * The member `actor` may manage (change or remove), with their username, for a page that asks before acting; a
 * MembershipError where `assertCanManage` would refuse the change itself.
 */
export async function manageableMember(
  db: Kysely<Database>,
  actor: MemberRow,
  targetId: string,
): Promise<MemberRow & { username: string }> {
  const target = await db
    .selectFrom('members')
    .innerJoin('users', 'users.id', 'members.user_id')
    .selectAll('members')
    .select('users.username')
    .where('members.id', '=', targetId)
    .executeTakeFirst();
  assertCanManage(actor, target);
  return target!;
}

/**
 * Checks that `actor` may manage `target`: an active member with members:manage, same agency, not oneself, owners only
 * by owners.
 */
function assertCanManage(actor: MemberRow, target: MemberRow | undefined, newRole?: Role): MemberRow {
  if (actor.status !== 'active' || !roleAllows(actor.role, 'members:manage')) {
    throw new MembershipError('You may not manage members');
  }
  if (!target || target.agency_id !== actor.agency_id || target.status !== 'active') {
    throw new MembershipError('No such member');
  }
  if (target.id === actor.id) throw new MembershipError('You cannot change your own membership here');
  if ((target.role === 'owner' || newRole === 'owner') && actor.role !== 'owner') {
    throw new MembershipError('Only an owner may change an owner or make one');
  }
  return target;
}

/**
 * What changing a membership needs: the store (and its engine, for the row locks), the clock, and the cached liveness
 * of connections to forget.
 */
export interface MembershipDeps {
  db: Kysely<Database>;
  store: Pick<Store, 'engine'>;
  clock: Clock;
  connectionLiveness: ConnectionLivenessMemory;
  metrics: Pick<Metrics, 'connectionRevoked'>;
}

/**
 * The acting and the target memberships as they are now, read in the change's transaction, so that the change is
 * checked against what it will commit over. Checked against the actor as the request found it, two owners who demoted
 * or removed each other at the same moment both passed, and the agency was left with no owner, which no page can
 * undo. The embedded database runs one transaction at a time; on PostgreSQL both rows stay locked until the commit,
 * taken in id order so that two changes over the same pair never wait on each other crosswise.
 */
async function lockMemberships(
  trx: Transaction<Database>,
  engine: Engine,
  actorId: string,
  targetId = actorId,
): Promise<{ actor: MemberRow; target: MemberRow | undefined }> {
  const read = trx.selectFrom('members').selectAll().where('id', 'in', [actorId, targetId]).orderBy('id');
  const rows = await (engine === 'postgres' ? read.forUpdate() : read).execute();
  const actor = rows.find((r) => r.id === actorId);
  // The actor's row was read by the request; rows are never deleted, so it is still there.
  if (!actor) throw new MembershipError('You may not manage members');
  return { actor, target: rows.find((r) => r.id === targetId) };
}

/**
 * Changes a member's role; every connection of that member is narrowed to ceiling ∩ new role in the same
 * transaction (docs/contract.md#revocation). Nothing cached needs dropping: liveness does not change, and every agency
 * call reads the grant (ceiling and role) from the database. Returns the connection ids narrowed.
 */
export async function changeRole(
  deps: MembershipDeps,
  actor: MemberRow,
  targetId: string,
  role: Role,
): Promise<string[]> {
  const { db, clock } = deps;
  return db.transaction().execute(async (trx) => {
    const now = await lockMemberships(trx, deps.store.engine, actor.id, targetId);
    const target = assertCanManage(now.actor, now.target, role);
    if (target.role === role) return [];
    await trx
      .updateTable('members')
      .set({ role })
      .where('id', '=', target.id)
      .where('status', '=', 'active')
      .execute();
    await audit(trx, clock, {
      type: 'member.role_changed',
      agencyId: target.agency_id,
      memberId: target.id,
      actorUserId: actor.user_id,
      detail: { from: target.role, to: role },
    });
    return narrowMemberConnections(trx, clock, target.id, role, actor.user_id);
  });
}

/**
 * Removes a member; every connection of that member ends (docs/contract.md#revocation) and is forgotten by the
 * liveness cache, so this instance refuses its tokens at once. Returns the connection ids ended.
 */
export async function removeMember(
  deps: MembershipDeps,
  actor: MemberRow,
  targetId: string,
): Promise<string[]> {
  const { db, clock } = deps;
  const ended = await db.transaction().execute(async (trx) => {
    const now = await lockMemberships(trx, deps.store.engine, actor.id, targetId);
    const target = assertCanManage(now.actor, now.target);
    await trx
      .updateTable('members')
      .set({ status: 'removed', removed_at: clock.now() })
      .where('id', '=', target.id)
      .execute();
    await audit(trx, clock, {
      type: 'member.removed',
      agencyId: target.agency_id,
      memberId: target.id,
      actorUserId: actor.user_id,
      detail: { role: target.role },
    });
    return endMemberConnections(trx, clock, target.id, actor.user_id);
  });
  for (const id of ended) deps.connectionLiveness.forget(id);
  deps.metrics.connectionRevoked('member_removed', ended.length);
  return ended;
}

/**
 * Toggles "allow agent write" (settings:manage), checked as a membership change is: against the actor's membership as
 * it is in the transaction, so an admin demoted or removed a moment before cannot change it.
 */
export async function setAgentWrite(
  deps: Pick<MembershipDeps, 'db' | 'clock' | 'store'>,
  actor: MemberRow,
  enabled: boolean,
): Promise<void> {
  const { db, clock } = deps;
  await db.transaction().execute(async (trx) => {
    const now = (await lockMemberships(trx, deps.store.engine, actor.id)).actor;
    if (now.status !== 'active' || !roleAllows(now.role, 'settings:manage')) {
      throw new MembershipError('You may not change settings');
    }
    const r = await trx
      .updateTable('agencies')
      .set({ agent_write_enabled: enabled ? 1 : 0 })
      .where('id', '=', actor.agency_id)
      .where('agent_write_enabled', '=', enabled ? 0 : 1)
      .executeTakeFirst();
    if (r.numUpdatedRows !== 1n) return;
    await audit(trx, clock, {
      type: 'agency.agent_write_changed',
      agencyId: actor.agency_id,
      actorUserId: actor.user_id,
      detail: { agent_write_enabled: enabled },
    });
  });
}
