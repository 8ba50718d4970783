import { type Kysely, sql } from 'kysely';

/**
 * One connection per app (docs/contract.md#connections): at most one active connection per user, agency, client and
 * resource. Existing duplicates are folded into the newest one (the newest consent governs): the refresh-token
 * families and codes of the older ones move to it, so every device keeps working after one refresh, and the older
 * rows end with reason `merged`.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time and must not follow the live schema type
export async function up(db: Kysely<any>): Promise<void> {
  const active = await db
    .selectFrom('connections')
    .select(['id', 'user_id', 'agency_id', 'client_id', 'resource', 'created_at', 'expires_at'])
    .where('status', '=', 'active')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  const newest = new Map<string, { id: string; expires_at: number }>();
  const now = Date.now();
  for (const row of active) {
    const app = JSON.stringify([row.user_id, row.agency_id, row.client_id, row.resource]);
    const survivor = newest.get(app);
    if (!survivor) {
      newest.set(app, { id: row.id, expires_at: Number(row.expires_at) });
      continue;
    }
    await db
      .updateTable('refresh_tokens')
      .set({ connection_id: survivor.id })
      .where('connection_id', '=', row.id)
      .execute();
    await db
      .updateTable('authorization_codes')
      .set({ connection_id: survivor.id })
      .where('connection_id', '=', row.id)
      .execute();
    await db
      .updateTable('connections')
      .set({ status: 'revoked', revoked_at: now, revoke_reason: 'merged' })
      .where('id', '=', row.id)
      .execute();
    if (Number(row.expires_at) > survivor.expires_at) {
      survivor.expires_at = Number(row.expires_at);
      await db
        .updateTable('connections')
        .set({ expires_at: row.expires_at })
        .where('id', '=', survivor.id)
        .execute();
    }
  }
  // Partial and expression indexes: the same statement on SQLite and PostgreSQL.
  await sql`CREATE UNIQUE INDEX connections_one_active_per_app
    ON connections (user_id, client_id, resource, coalesce(agency_id, ''))
    WHERE status = 'active'`.execute(db);
}
