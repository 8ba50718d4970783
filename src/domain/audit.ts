import type { Kysely, Transaction } from 'kysely';
import type { AuditEventsTable, Database } from '../store/schema.js';
import type { Clock } from '../base/clock.js';
import { newId } from '../base/ids.js';

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

/** Appends an audit event (within the caller's transaction when one is given). */
export async function audit(
  db: Kysely<Database> | Transaction<Database>,
  clock: Clock,
  e: AuditInput,
): Promise<void> {
  await db
    .insertInto('audit_events')
    .values({
      id: newId('evt'),
      type: e.type,
      agency_id: e.agencyId ?? null,
      actor_user_id: e.actorUserId ?? null,
      member_id: e.memberId ?? null,
      connection_id: e.connectionId ?? null,
      detail: JSON.stringify(e.detail ?? {}),
      created_at: clock.now(),
    })
    .execute();
}

/** The latest events of an agency, newest first; with `memberId`, only those about that member. */
export function listAuditEvents(
  db: Kysely<Database>,
  o: { agencyId: string; memberId?: string; limit?: number },
): Promise<AuditRow[]> {
  let q = db.selectFrom('audit_events').selectAll().where('agency_id', '=', o.agencyId);
  if (o.memberId) q = q.where('member_id', '=', o.memberId);
  return q
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(o.limit ?? 50)
    .execute();
}
