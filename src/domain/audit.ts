import type { Kysely, Transaction } from 'kysely';
import type { AuditEventsTable, Database } from '../store/schema.js';
import type { Clock } from '../base/clock.js';
import { newOrderedId } from '../base/ids.js';

export const AUDIT_TYPES = [
  'connection.created',
  'connection.revoked',
  'connection.narrowed',
  'connection.refresh_reuse_detected',
  'connection.code_replay_detected',
  'member.role_changed',
  'member.removed',
  'agency.agent_write_changed',
] as const;
export type AuditType = (typeof AUDIT_TYPES)[number];

export interface AuditInput {
  type: AuditType;
  agencyId?: string | null;
  actorUserId?: string | null;
  memberId?: string | null;
  connectionId?: string | null;
  detail?: Record<string, unknown>;
}

export type AuditRow = AuditEventsTable;

/**
 * Appends an audit event (within the caller's transaction when one is given). Its id sorts in the order of writing,
 * so events written in the same millisecond (a removal and the connections it ends) are listed in that order.
 */
export async function audit(
  db: Kysely<Database> | Transaction<Database>,
  clock: Clock,
  e: AuditInput,
): Promise<void> {
  const now = clock.now();
  await db
    .insertInto('audit_events')
    .values({
      id: newOrderedId('evt', now),
      type: e.type,
      agency_id: e.agencyId ?? null,
      actor_user_id: e.actorUserId ?? null,
      member_id: e.memberId ?? null,
      connection_id: e.connectionId ?? null,
      detail: JSON.stringify(e.detail ?? {}),
      created_at: now,
    })
    .execute();
}

/** An audit event with the names a person reads it by: who did it, and whose membership it concerns. */
export interface AuditEntry extends AuditRow {
  actor_username: string | null;
  member_username: string | null;
  /** The client the event is about: its connection's, or, the connection row gone, the one the event recorded. */
  client_id: string | null;
}

/**
 * The latest events of an agency, newest first, with the usernames of the actor and of the member concerned and the
 * client of the connection concerned; with
 * `memberId`, only those about that member. The joins are by primary key, so the cost is the index walk for `limit`
 * rows, whatever the table's size.
 */
export async function listAuditHistory(
  db: Kysely<Database>,
  o: { agencyId: string; memberId?: string; limit?: number },
): Promise<AuditEntry[]> {
  let q = db
    .selectFrom('audit_events as e')
    .leftJoin('users as actor', 'actor.id', 'e.actor_user_id')
    .leftJoin('members as m', 'm.id', 'e.member_id')
    .leftJoin('users as subject', 'subject.id', 'm.user_id')
    .leftJoin('connections as c', 'c.id', 'e.connection_id')
    .selectAll('e')
    .select(['actor.username as actor_username', 'subject.username as member_username', 'c.client_id'])
    .where('e.agency_id', '=', o.agencyId);
  if (o.memberId) q = q.where('e.member_id', '=', o.memberId);
  const rows = await q
    .orderBy('e.created_at', 'desc')
    .orderBy('e.id', 'desc')
    .limit(o.limit ?? 50)
    .execute();
  for (const e of rows) e.client_id ??= (JSON.parse(e.detail) as { client_id?: string }).client_id ?? null;
  return rows;
}
