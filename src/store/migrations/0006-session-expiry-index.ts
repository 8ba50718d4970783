import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time and must not follow the live schema type
export async function up(db: Kysely<any>): Promise<void> {
  // Ended sessions are pruned by expiry (domain/pruning.ts), as refresh tokens are (0003).
  await db.schema.createIndex('sessions_expires_at').on('sessions').column('expires_at').execute();
}
