import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time and must not follow the live schema type
export async function up(db: Kysely<any>): Promise<void> {
  // Expired refresh tokens are pruned by expiry (domain/connections.ts pruneExpiredGrants).
  await db.schema
    .createIndex('refresh_tokens_expires_at')
    .on('refresh_tokens')
    .column('expires_at')
    .execute();
}
